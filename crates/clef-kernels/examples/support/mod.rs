//! What the speed examples share: a seeded generator for their synthetic weights and
//! activations, and the best-of-N timer.

use std::time::Instant;

/// The next value of a 64-bit linear congruential generator (its top 31 bits).
#[allow(dead_code)] // not every example draws numbers this way
pub fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

/// The fastest of `runs` timed calls of `f`, in seconds, after one untimed warm-up call.
pub fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}
