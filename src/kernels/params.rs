//! A kernel's params: the uniform struct at binding 0, written once in Rust with
//! [`kernel_params!`], which records its layout beside it. Each [`Kernel`](super::Kernel)
//! names the layout its WGSL declares; dispatching checks that the params given are that
//! struct, and a test parses every kernel's WGSL (naga) and checks the struct there has the
//! same fields at the same offsets, of the same types and size.

/// One field of a params struct: its name, byte offset, size and Rust type as written.
#[derive(Debug, PartialEq, Eq)]
pub struct ParamField {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
    pub ty: &'static str,
}

/// A params struct's layout; `name` is its path (`sesame::kernels::layer_norm::Params`).
#[derive(Debug, PartialEq, Eq)]
pub struct ParamsLayout {
    pub name: &'static str,
    pub size: usize,
    pub fields: &'static [ParamField],
}

/// A struct that goes to a kernel's binding 0 (made by `kernel_params!`).
pub trait KernelParams: bytemuck::Pod {
    const LAYOUT: &'static ParamsLayout;
}

/// Declares a `#[repr(C)]` params struct (fields of `u32`, `i32`, `f32`, arrays of them, or
/// a struct made with this macro that the WGSL spells out field by field — the test's
/// `NESTED` lists them —, padded to 16 bytes as WGSL's uniforms are) and its [`KernelParams`]
/// layout. Fields whose name starts with `_` are padding, which the check does not compare
/// by name.
macro_rules! kernel_params {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($(#[$field_meta:meta])* $field_vis:vis $field:ident: $ty:ty),* $(,)? }) => {
        #[repr(C)]
        #[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
        $(#[$meta])*
        $vis struct $name {
            $($(#[$field_meta])* $field_vis $field: $ty),*
        }

        impl $crate::kernels::KernelParams for $name {
            const LAYOUT: &'static $crate::kernels::ParamsLayout = &$crate::kernels::ParamsLayout {
                name: concat!(module_path!(), "::", stringify!($name)),
                size: ::core::mem::size_of::<$name>(),
                fields: &[$($crate::kernels::ParamField {
                    name: stringify!($field),
                    offset: ::core::mem::offset_of!($name, $field),
                    size: ::core::mem::size_of::<$ty>(),
                    ty: stringify!($ty),
                }),*],
            };
        }
    };
}
pub(crate) use kernel_params;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::kernels::Kernel;

    /// The type of a WGSL struct member as Rust would write it (`u32`, `[u32; 2]`).
    fn rust_type(module: &naga::Module, ty: naga::Handle<naga::Type>) -> String {
        let scalar = |s: naga::Scalar| match (s.kind, s.width) {
            (naga::ScalarKind::Uint, 4) => "u32".to_string(),
            (naga::ScalarKind::Sint, 4) => "i32".to_string(),
            (naga::ScalarKind::Float, 4) => "f32".to_string(),
            other => format!("{other:?}"),
        };
        match &module.types[ty].inner {
            naga::TypeInner::Scalar(s) => scalar(*s),
            naga::TypeInner::Vector { size, scalar: s } => format!("[{}; {}]", scalar(*s), *size as u8),
            other => format!("{other:?}"),
        }
    }

    /// The structs that params hold whole and WGSL spells out (dropout's mask words).
    const NESTED: [&ParamsLayout; 1] = [crate::kernels::dropout::MaskParams::LAYOUT];

    /// `layout`'s fields as (name, offset, type), a nested struct's spelt out as
    /// `{field}_{its field}` (attention's `drop: MaskParams` as WGSL's `drop_threshold`, …).
    fn flat_fields(layout: &ParamsLayout) -> Vec<(String, usize, String)> {
        let mut fields = Vec::new();
        for f in layout.fields {
            match NESTED.iter().find(|n| n.name.rsplit("::").next() == Some(f.ty)) {
                Some(nested) => fields.extend(flat_fields(nested).into_iter().map(|(name, offset, ty)| (format!("{}_{name}", f.name), f.offset + offset, ty))),
                None => fields.push((f.name.to_string(), f.offset, f.ty.replace(' ', ""))),
            }
        }
        fields
    }

    /// The differences between `kernel`'s WGSL uniform struct at binding 0 and its Rust params.
    fn differences(kernel: &Kernel) -> Vec<String> {
        let module = match naga::front::wgsl::parse_str(kernel.source) {
            Ok(module) => module,
            Err(e) => return vec![format!("the WGSL does not parse: {}", e.emit_to_string(kernel.source))],
        };
        let uniform = module
            .global_variables
            .iter()
            .map(|(_, v)| v)
            .find(|v| v.space == naga::AddressSpace::Uniform && v.binding.as_ref().is_some_and(|b| b.group == 0 && b.binding == 0));
        let Some(uniform) = uniform else { return vec!["no uniform at @group(0) @binding(0)".into()] };
        let naga::TypeInner::Struct { members, span } = &module.types[uniform.ty].inner else {
            return vec!["binding 0 is not a struct".into()];
        };
        let rust = kernel.params;
        let mut found = Vec::new();
        if *span as usize != rust.size {
            found.push(format!("WGSL's struct is {span} bytes, {} is {}", rust.name, rust.size));
        }
        let fields = flat_fields(rust);
        let named = |name: &Option<String>| name.as_deref().filter(|n| !n.starts_with('_')).map(str::to_string);
        for m in members {
            let Some(name) = named(&m.name) else { continue };
            match fields.iter().find(|(n, _, _)| *n == name) {
                None => found.push(format!("WGSL's `{name}` is not in {}", rust.name)),
                Some((_, offset, ty)) => {
                    let wgsl = rust_type(&module, m.ty);
                    if *offset != m.offset as usize || *ty != wgsl.replace(' ', "") {
                        found.push(format!("`{name}`: WGSL has {wgsl} at byte {}, Rust {ty} at byte {offset}", m.offset));
                    }
                }
            }
        }
        for (name, _, _) in fields.iter().filter(|(n, _, _)| !n.starts_with('_')) {
            if !members.iter().any(|m| m.name.as_ref() == Some(name)) {
                found.push(format!("{}'s `{name}` is not in the WGSL struct", rust.name));
            }
        }
        found
    }

    #[test]
    fn every_kernels_params_match_its_wgsl_struct() {
        let kernels = crate::kernels::all();
        assert!(kernels.len() >= 50, "{} kernels", kernels.len());
        let mut wrong = Vec::new();
        for kernel in kernels {
            for difference in differences(kernel) {
                wrong.push(format!("{} ({}): {difference}", kernel.entry, kernel.shader));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// `crate::kernels::all()` is a list kept by hand: every entry point of every shader
    /// must be in it, or the check above would pass over it.
    #[test]
    fn every_entry_point_of_every_shader_is_checked() {
        let kernels = crate::kernels::all();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
        let mut missing = Vec::new();
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            let shader = path.file_stem().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            for (_, after) in text.match_indices("@compute").map(|(at, _)| text.split_at(at)) {
                let entry = after.split("fn ").nth(1).and_then(|rest| rest.split('(').next()).unwrap().trim();
                if !kernels.iter().any(|k| k.shader == shader && k.entry == entry) {
                    missing.push(format!("{shader}.wgsl: {entry}"));
                }
            }
        }
        assert!(missing.is_empty(), "entry points without a Kernel in kernels::all(): {missing:?}");
    }

    #[test]
    fn a_wrong_field_is_found() {
        kernel_params! {
            struct Wrong {
                rows: u32,
                cols: f32,
                extra: u32,
                _pad: u32,
            }
        }
        const KERNEL: Kernel = Kernel {
            shader: "test",
            source: "struct Params { rows: u32, cols: u32, eps: f32, _pad: u32 }\n@group(0) @binding(0) var<uniform> p: Params;\n@compute @workgroup_size(1) fn main() { _ = p.rows; }",
            entry: "main",
            bindings: &[],
            params: Wrong::LAYOUT,
            twin: None,
        };
        let found = differences(&KERNEL);
        assert!(found.iter().any(|d| d.contains("`cols`: WGSL has u32 at byte 4, Rust f32 at byte 4")), "{found:?}");
        assert!(found.iter().any(|d| d.contains("WGSL's `eps` is not in")), "{found:?}");
        assert!(found.iter().any(|d| d.contains("`extra` is not in the WGSL struct")), "{found:?}");
    }
}
