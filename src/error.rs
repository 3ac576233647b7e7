//! The one error type of the library. Every fallible call returns [`Result`]; library code never
//! panics on bad input. Where the failure is another library's (the file system, wgpu,
//! tokenizers), its error is kept as the [`source`](std::error::Error::source) and quoted in
//! the message, so that printing the error alone says everything.

use thiserror::Error;

/// Everything that can go wrong in Sesame, with enough context to say what to fix.
#[derive(Debug, Error)]
pub enum SesameError {
    /// No WebGPU / Vulkan / Metal / DX12 adapter could be found.
    #[error("no GPU adapter available: {0}")]
    NoAdapter(String),

    /// The adapter was found but a device could not be created from it.
    #[error("could not create a GPU device: {0}")]
    DeviceRequest(#[source] wgpu::RequestDeviceError),

    /// The device was lost (driver reset, browser tab backgrounded too long, `destroy()`).
    #[error("the GPU device was lost ({0}): the models on it are gone; load them again")]
    DeviceLost(String),

    /// A WGSL shader failed to compile or its pipeline failed validation.
    #[error("shader `{shader}` failed to compile: {message}")]
    ShaderCompilation { shader: String, message: String },

    /// Any other validation or out-of-memory error reported by the GPU API.
    #[error("GPU error: {0}")]
    Device(String),

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

    /// A file could not be read or written: the system's error.
    #[error("{}: {source}", path.display())]
    File { path: std::path::PathBuf, source: std::io::Error },

    /// Input or output that could not be read or written, as a message.
    #[error("{0}")]
    Io(String),

    /// A checkpoint is malformed, lacks a tensor, or disagrees with its config.
    #[error("checkpoint: {0}")]
    Checkpoint(String),

    /// A tokenizer could not be loaded or failed on its input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// The tokenizers library (or the JSON it reads) failed: what Sesame asked of it, and its
    /// error.
    #[error("tokenizer: {what}: {source}")]
    TokenizerLibrary { what: String, source: tokenizers::Error },

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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::error::Error;

    #[test]
    fn another_library_s_error_is_kept_as_the_source_and_quoted() {
        let missing = crate::files::read_file("/nonexistent/sesame".as_ref()).unwrap_err();
        let io = missing.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the io::Error as the source");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(missing.to_string(), format!("/nonexistent/sesame: {io}"));
        let bad = crate::tokenize::TextTokenizer::from_bytes(b"{").err().expect("an error");
        let cause = bad.source().expect("the tokenizers library's error as the source");
        assert_eq!(bad.to_string(), format!("tokenizer: invalid tokenizer.json: {cause}"));
    }
}
