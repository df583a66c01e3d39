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

/// One cache line.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A growable buffer of `T` whose first element starts a cache line: the AMX tile loads run
/// at a sixth of their rate on rows that straddle two lines (measured on Sapphire Rapids:
/// 63 against 9.5 ns for four 1 KiB tile loads), so every buffer they read is one of these,
/// with row strides that are multiples of 64 bytes.
pub(crate) struct Lines<T> {
    lines: Vec<Line>,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T> Default for Lines<T> {
    fn default() -> Self {
        Lines {
            lines: Vec::new(),
            len: 0,
            _t: std::marker::PhantomData,
        }
    }
}

impl<T: bytemuck::Pod> Lines<T> {
    /// Makes the buffer `len` elements long, keeping what it holds up to there; new elements
    /// are zero.
    pub(crate) fn resize(&mut self, len: usize) {
        let bytes = len * std::mem::size_of::<T>();
        let need = bytes.div_ceil(64);
        if need > self.lines.len() {
            self.lines.resize(need, Line([0; 64]));
        }
        if len > self.len {
            let old = self.len;
            self.len = len;
            self[old..].fill(T::zeroed());
        }
        self.len = len;
    }

    /// [`Lines::resize`] that only grows.
    pub(crate) fn grow(&mut self, len: usize) {
        if len > self.len {
            self.resize(len);
        }
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for Lines<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &bytemuck::cast_slice::<Line, T>(&self.lines)[..self.len]
    }
}

impl<T: bytemuck::Pod> std::ops::DerefMut for Lines<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut bytemuck::cast_slice_mut::<Line, T>(&mut self.lines)[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_start_a_cache_line_and_keep_their_contents() {
        let mut b = Lines::<u16>::default();
        b.resize(3);
        b.copy_from_slice(&[1, 2, 3]);
        b.resize(1000);
        assert_eq!(b.as_ptr() as usize % 64, 0);
        assert_eq!(&b[..4], &[1, 2, 3, 0]);
        b.resize(2);
        b.grow(1);
        assert_eq!(b.len(), 2);
        b.resize(5);
        assert_eq!(&b[..], &[1, 2, 0, 0, 0]);
    }
}
