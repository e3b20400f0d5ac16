//! A counting allocator for the benchmarks that measure memory, so heap is measured, not
//! guessed: live bytes (as requested, not as the system allocator rounds them) and their
//! high-water mark since the last [`reset_peak`]. Each bench declares it its allocator:
//!
//! ```ignore
//! #[path = "support/counting.rs"]
//! mod counting;
//! #[global_allocator]
//! static ALLOCATOR: counting::Counting = counting::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator, counting.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn size(layout: Layout) -> isize {
    // A layout's size never exceeds isize::MAX (`Layout`'s own invariant).
    isize::try_from(layout.size()).unwrap_or(isize::MAX)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            grew(size(layout));
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            grew(size(layout));
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(size(layout), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            grew(isize::try_from(new_size).unwrap_or(isize::MAX) - size(layout));
        }
        moved
    }
}

/// Live heap bytes now.
#[allow(dead_code)]
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Starts a new high-water mark at the live bytes now, and returns them.
#[allow(dead_code)]
pub fn reset_peak() -> isize {
    let now = live();
    PEAK.store(now, Ordering::Relaxed);
    now
}

/// The most live bytes since the last [`reset_peak`].
#[allow(dead_code)]
pub fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}
