//! The one error type of the library. Every fallible call returns [`Result`]; library code never
//! panics on bad input.

use thiserror::Error;

/// Everything that can go wrong in Sesame, with enough context to say what to fix.
#[derive(Debug, Error)]
pub enum SesameError {
    /// No WebGPU / Vulkan / Metal / DX12 adapter could be found.
    #[error("no GPU adapter available: {0}")]
    NoAdapter(String),

    /// The adapter was found but a device could not be created from it.
    #[error("could not create a GPU device: {0}")]
    DeviceRequest(String),

    /// The device was lost (driver reset, browser tab backgrounded too long, `destroy()`).
    #[error("the GPU device was lost ({0}): the models on it are gone; load them again")]
    DeviceLost(String),

    /// A WGSL shader failed to compile or its pipeline failed validation.
    #[error("shader `{shader}` failed to compile: {message}")]
    ShaderCompilation { shader: String, message: String },

    /// Any other validation or out-of-memory error reported by the GPU API.
    #[error("GPU error: {0}")]
    Gpu(String),

    /// A tensor, or a binding of one, is larger than the device allows.
    #[error("{what} needs {bytes} bytes, over the {limit_name} of {limit} bytes")]
    TooLarge { what: String, bytes: u64, limit_name: &'static str, limit: u64 },

    /// Operands whose shapes do not fit the op.
    #[error("{op}: {message}")]
    Shape { op: &'static str, message: String },

    /// An operand of a dtype the op does not support.
    #[error("{op}: expected {expected} tensor for `{operand}`, got {actual}")]
    DType { op: &'static str, operand: &'static str, expected: &'static str, actual: &'static str },

    /// Any other invalid argument (empty input, out-of-range id, bad option value).
    #[error("{op}: {message}")]
    InvalidArgument { op: &'static str, message: String },

    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),

    /// A checkpoint is malformed, lacks a tensor, or disagrees with its config.
    #[error("checkpoint: {0}")]
    Checkpoint(String),

    /// A tokenizer could not be loaded or failed on its input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// A model's output holds NaN or ±Inf: from weights that overflow f32 on this input (or
    /// non-finite weights loaded on purpose).
    #[error("`{output}` holds NaN or infinite values, which first appear in {location}: the weights overflow f32 on this input")]
    NonFinite { output: String, location: String },

    /// Reading a buffer back from the GPU failed.
    #[error("reading back from the GPU failed: {0}")]
    Readback(String),
}

pub type Result<T, E = SesameError> = std::result::Result<T, E>;

/// Parses JSON into `T`; the error names the field at fault (`hidden_size: invalid type:
/// string "big", expected usize at line 1 column 30`), which serde's own message does not.
#[cfg(not(target_arch = "wasm32"))]
pub fn from_json_named<T: serde::de::DeserializeOwned>(json: &[u8]) -> std::result::Result<T, String> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| match e.path().to_string().as_str() {
        "." => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    })?;
    deserializer.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// In the browser, serde's own message (naming the field's path costs more bytes than the
/// module's size budget has).
#[cfg(target_arch = "wasm32")]
pub fn from_json_named<T: serde::de::DeserializeOwned>(json: &[u8]) -> std::result::Result<T, String> {
    serde_json::from_slice(json).map_err(|e| e.to_string())
}

/// Shorthand for [`SesameError::Shape`] with a formatted message.
macro_rules! shape_err {
    ($op:expr, $($fmt:tt)+) => {
        $crate::error::SesameError::Shape { op: $op, message: format!($($fmt)+) }
    };
}

/// Shorthand for [`SesameError::InvalidArgument`] with a formatted message.
macro_rules! arg_err {
    ($op:expr, $($fmt:tt)+) => {
        $crate::error::SesameError::InvalidArgument { op: $op, message: format!($($fmt)+) }
    };
}

pub(crate) use {arg_err, shape_err};
