//! Reusable f32 buffers for the per-call outputs of parallel kernels, so that repeated calls
//! (one per layer and chunk) neither page-fault on fresh allocations nor return memory to the
//! system each time. Buffers are kept per calling thread.

use std::cell::RefCell;

/// Buffers kept per thread; enough for the nested uses of one kernel call.
const KEEP: usize = 4;

thread_local! {
    static POOL: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// A zeroed buffer of `len` elements, reusing a previously returned allocation when one is big
/// enough.
pub(crate) fn take(len: usize) -> Vec<f32> {
    let reused = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let best = pool
            .iter()
            .enumerate()
            .filter(|(_, v)| v.capacity() >= len)
            .min_by_key(|(_, v)| v.capacity())
            .map(|(i, _)| i);
        best.map(|i| pool.swap_remove(i))
    });
    let mut buf = reused.unwrap_or_default();
    buf.clear();
    buf.resize(len, 0.0);
    buf
}

/// Returns a buffer for reuse by later calls on this thread.
pub(crate) fn give(buf: Vec<f32>) {
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < KEEP {
            pool.push(buf);
        } else if let Some(smallest) = pool.iter_mut().min_by_key(|v| v.capacity()) {
            if smallest.capacity() < buf.capacity() {
                *smallest = buf;
            }
        }
    });
}
