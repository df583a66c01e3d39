//! What the speed examples share: their arguments, the thread pool, the Clef-Flash linear
//! shapes they time, and a reproducible bit source for the random weights.

/// (name, rows, cols): Clef-Flash MLP up/gate, down, DeltaNet in_proj_qkv, out_proj.
pub const FLASH_SHAPES: [(&str, usize, usize); 4] = [
    ("mlp.up_proj", 12288, 4096),
    ("mlp.down_proj", 4096, 12288),
    ("in_proj_qkv", 8192, 4096),
    ("out_proj", 4096, 4096),
];

/// `[reps] [threads]` from the command line (defaults 7 and 2), with the global rayon pool
/// started at that many threads; `None` when the pool cannot start.
pub fn reps_and_threads() -> Option<(usize, usize)> {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(7);
    let threads: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
    {
        eprintln!("could not start {threads} threads: {e}");
        return None;
    }
    Some((reps, threads))
}

/// xorshift64 from a fixed seed: the same weights on every run.
pub fn bits() -> impl FnMut() -> u64 {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
