//! Resource bounds on untrusted input: every size read from a file, a config or a flag is
//! checked here before it sizes an allocation, so that a bad number is an error naming what
//! asked for how much — not an allocator abort, a wasm trap or a read that never ends.
//!
//! The host memory budget defaults to the machine's physical memory natively (2 GiB in wasm,
//! half of wasm32's address space) and is overridden by `SESAME_MEMORY_BUDGET` (bytes, or with
//! a K/M/G/T suffix), `sesame --memory-budget`, or [`set_host_memory_budget`].

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Result, SesameError};

/// 0: not set yet (read from the environment and the machine on first use).
static BUDGET: AtomicU64 = AtomicU64::new(0);

/// The name the budget goes by in errors.
pub const BUDGET_NAME: &str = "host memory budget";

/// Parses a byte count: `1073741824`, `512M`, `24G`, `1.5T` (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let scale: u64 = match unit.to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(SesameError::InvalidArgument { op: "memory budget", message: format!("`{text}`: unknown unit `{unit}` (use K, M, G or T)") }),
    };
    let value: f64 =
        number.trim().parse().map_err(|_| SesameError::InvalidArgument { op: "memory budget", message: format!("`{text}` is not a byte count") })?;
    let bytes = value * scale as f64;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(SesameError::InvalidArgument { op: "memory budget", message: format!("`{text}` must be at least 1 byte") });
    }
    Ok(bytes as u64)
}

/// The machine's physical memory, where the platform tells it.
fn machine_memory() -> Option<u64> {
    #[cfg(all(unix, not(target_arch = "wasm32")))]
    {
        // SAFETY: sysconf only reads system configuration values.
        let (pages, page_size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        if pages > 0 && page_size > 0 {
            return Some(pages as u64 * page_size as u64);
        }
    }
    None
}

/// The default budget: `SESAME_MEMORY_BUDGET`, else the machine's memory (wasm: 2 GiB; a
/// platform that does not tell: 16 GiB).
fn default_budget() -> u64 {
    #[cfg(not(target_arch = "wasm32"))]
    if let Ok(text) = std::env::var("SESAME_MEMORY_BUDGET") {
        match parse_bytes(&text) {
            Ok(bytes) => return bytes,
            Err(e) => log::warn!("SESAME_MEMORY_BUDGET ignored: {e}"),
        }
    }
    if cfg!(target_arch = "wasm32") {
        2 << 30
    } else {
        machine_memory().unwrap_or(16 << 30)
    }
}

/// The host memory budget in bytes: the most that one allocation (or all of the host
/// device's tensors together) may take.
pub fn host_memory_budget() -> u64 {
    match BUDGET.load(Ordering::Relaxed) {
        0 => {
            let budget = default_budget();
            BUDGET.store(budget, Ordering::Relaxed);
            budget
        }
        budget => budget,
    }
}

/// Overrides the host memory budget for the rest of the process.
pub fn set_host_memory_budget(bytes: u64) {
    BUDGET.store(bytes.max(1), Ordering::Relaxed);
}

/// Formats a byte count for errors: `34359738368 bytes (32.0 GiB)`.
pub fn describe_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match UNITS.iter().find(|(_, size)| bytes >= *size) {
        Some((unit, size)) => format!("{bytes} bytes ({:.1} {unit})", bytes as f64 / *size as f64),
        None => format!("{bytes} bytes"),
    }
}

/// At most this much idle memory stays in a device's pool; beyond it released buffers are
/// freed.
pub const MAX_POOLED_BYTES: u64 = 1 << 30;

/// Buffers and bytes held by a device's live tensors and by its pool of idle buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    pub live_buffers: usize,
    pub live_bytes: u64,
    pub pooled_buffers: usize,
    pub pooled_bytes: u64,
}

/// An error unless `bytes` fit the host memory budget; `what` says what asked for them.
pub fn check_host_bytes(what: impl FnOnce() -> String, bytes: u64) -> Result<()> {
    let limit = host_memory_budget();
    if bytes > limit {
        return Err(SesameError::TooLarge { what: what(), bytes, limit_name: BUDGET_NAME, limit });
    }
    Ok(())
}

/// The bytes of `count` elements of `element_bytes` each (saturating: an overflow is as
/// over-budget as any other huge number), checked against the budget.
pub fn check_elements(what: impl FnOnce() -> String, count: u64, element_bytes: u64) -> Result<()> {
    check_host_bytes(what, count.saturating_mul(element_bytes))
}

/// `len` zeros, counted against the host memory budget as `what`; running out of memory is
/// an error, not an abort (which in wasm would be an `unreachable` trap).
pub fn zeroed_vec<T: Copy + Default>(what: impl Fn() -> String, len: usize) -> Result<Vec<T>> {
    let bytes = std::mem::size_of::<T>() as u64;
    check_elements(&what, len as u64, bytes)?;
    let mut values = Vec::new();
    values
        .try_reserve_exact(len)
        .map_err(|_| SesameError::Device(format!("out of memory: could not allocate {} for {}", describe_bytes(len as u64 * bytes), what())))?;
    values.resize(len, T::default());
    Ok(values)
}

/// The product of `dims`, saturating at `u64::MAX`.
pub fn saturating_product(dims: &[u64]) -> u64 {
    dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_units() {
        assert_eq!(parse_bytes("1024").unwrap(), 1024);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("24GiB").unwrap(), 24 << 30);
        assert_eq!(parse_bytes("1.5k").unwrap(), 1536);
        for bad in ["", "G", "-1", "0", "3X", "nan"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn over_budget_requests_name_what_and_how_much() {
        let err = check_elements(|| "a test buffer".into(), u64::MAX / 2, 4).unwrap_err().to_string();
        assert!(err.contains("a test buffer") && err.contains(BUDGET_NAME), "{err}");
        assert!(check_host_bytes(|| "small".into(), 1024).is_ok());
        assert_eq!(describe_bytes(3 << 30), "3221225472 bytes (3.0 GiB)");
    }
}
