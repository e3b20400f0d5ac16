//! Settings of mimalloc, the global allocator of the binary (src/main.rs) and the benches.

use libmimalloc_sys::{mi_option_get, mi_option_set, mi_option_t};

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (libmimalloc-sys exports no constant
/// for it; its neighbours `mi_option_eager_commit_delay` = 14 and `mi_option_use_numa_nodes` =
/// 16 are exported). A unit test checks that it is the option the environment variable sets.
const MI_OPTION_PURGE_DELAY: mi_option_t = 15;

/// Milliseconds mimalloc keeps freed pages before returning them to the OS: none. Its default,
/// 1 s, keeps a sync pass's transient peak resident until the heap is next used, so the peak
/// stays the resident size; purged at once, the pages a pass frees are back before the next
/// pass, and a resync's peak adds to the live heap only. The webhook and the DNS server do not
/// notice (docs/benchmarks.md, "Memory of `serve`").
pub const PURGE_DELAY_MS: i64 = 0;

/// Applies [`PURGE_DELAY_MS`] unless the operator set `MIMALLOC_PURGE_DELAY`. Call it first in
/// `main`, before any other thread runs: mimalloc's option setters are not thread-safe.
pub fn return_freed_pages_promptly() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: a plain setter of an integer option; called before other threads start.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS as _) }
}

/// The purge delay mimalloc uses now, in milliseconds.
#[allow(
    clippy::useless_conversion,
    reason = "c_long is i64 here but i32 on other targets"
)]
pub fn purge_delay_ms() -> i64 {
    // SAFETY: reads an integer option.
    i64::from(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option number is the one `MIMALLOC_PURGE_DELAY` sets: a child process (this test
    /// again) starts with the variable, and mimalloc reports its value for that number.
    #[test]
    fn the_option_number_is_the_purge_delay() {
        if std::env::var_os("GATEWAY_DNS_ALLOCATOR_CHILD").is_some() {
            println!("purge-delay={}", purge_delay_ms());
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let output = std::process::Command::new(exe)
            .args([
                "--exact",
                "allocator::tests::the_option_number_is_the_purge_delay",
                "--nocapture",
            ])
            .env("GATEWAY_DNS_ALLOCATOR_CHILD", "1")
            .env("MIMALLOC_PURGE_DELAY", "4321")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("purge-delay=4321"), "{stdout}");
        // Set by the environment, the operator's value wins over ours.
        return_freed_pages_promptly();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
        }
    }
}
