//! Reusable activation buffers of one chunk, so a long prefill does not allocate (and page
//! fault) fresh megabytes for every layer of every chunk.
//!
//! The mixer and the MLP of a layer run one after the other, and within each block most
//! intermediates die before the next one is made, so the large ones share three buffers
//! ([`Shared`]) instead of each having its own: at 512-row chunks of Clef-Flash that is 59 MB
//! where one buffer per intermediate took 190 MB (the whole difference is peak resident
//! memory, and the bf16 mode's longer chunks made it the difference between its footprint and
//! the exact path's). Each block's `forward` says which intermediate lives in which buffer.

use super::deltanet::DeltaNetScratch;

#[derive(Default)]
pub struct Scratch {
    /// `[n, hidden]`: the normed residual stream (a block's input), and the final norm's output.
    pub(crate) normed: Vec<f32>,
    /// `[n, hidden]`: a block's output before the residual add.
    pub(crate) block_out: Vec<f32>,
    pub(crate) shared: Shared,
    pub(crate) deltanet: DeltaNetScratch,
}

/// Three buffers the blocks of a layer take in turn, each sized to the largest use so far.
#[derive(Default)]
pub struct Shared {
    pub(crate) a: Vec<f32>,
    pub(crate) b: Vec<f32>,
    pub(crate) c: Vec<f32>,
}

/// Resize `v` to `len` and hand it out. Contents are unspecified; callers overwrite.
pub fn sized(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if v.len() < len {
        v.resize(len, 0.0);
    }
    &mut v[..len]
}

/// Hand out consecutive pieces of `v` of the given lengths (resized to hold them all).
pub fn pieces<const N: usize>(v: &mut Vec<f32>, lens: [usize; N]) -> [&mut [f32]; N] {
    let mut rest = sized(v, lens.iter().sum());
    lens.map(|len| {
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(len);
        rest = tail;
        piece
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_consecutive_and_grow_the_buffer() {
        let mut v = vec![7.0f32; 2];
        let [a, b, c] = pieces(&mut v, [3, 0, 2]);
        assert_eq!((a.len(), b.len(), c.len()), (3, 0, 2));
        a.fill(1.0);
        c.fill(3.0);
        assert_eq!(v, [1.0, 1.0, 1.0, 3.0, 3.0]);
        // a later, smaller use keeps the buffer's size
        let [d] = pieces(&mut v, [1]);
        assert_eq!(d, [1.0]);
        assert_eq!(v.len(), 5);
    }
}
