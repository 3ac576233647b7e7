//! The shaders' shared nonlinearities, as the twins compute them.

/// The shaders' `ACT_TANH` activation code (any other code is relu).
pub(super) const ACT_TANH: u32 = 0;

/// tanh clamped to where it is ±1 in f32, as the WGSL's `safe_tanh`.
pub(super) fn safe_tanh(x: f32) -> f32 {
    x.clamp(-15.0, 15.0).tanh()
}

pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The char-CNN and highway activation: tanh (as `safe_tanh`) for `ACT_TANH`, else relu.
pub(super) fn tanh_or_relu(tanh: bool, x: f32) -> f32 {
    if tanh {
        safe_tanh(x)
    } else {
        x.max(0.0)
    }
}
