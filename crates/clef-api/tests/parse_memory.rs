//! Parse memory: the peak heap a body makes the parser allocate, measured by a counting global
//! allocator (deterministic, unlike RSS), for the shapes that cost the most per body byte
//! (docs/api.md, *Parse memory*). One test function, so that nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use clef_api::json::{parse_json_with_depth, DEFAULT_MAX_DEPTH};
use clef_api::{parse_request, Limits};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn raise_peak(candidate: usize) {
    PEAK.fetch_max(candidate, Ordering::Relaxed);
}

// Counted as requested sizes. A `realloc` counts the old and the new block together at its
// peak (as if it copied), the stricter reading.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        raise_peak(now);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        raise_peak(now);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let before = CURRENT.load(Ordering::Relaxed);
        raise_peak(before + new_size);
        CURRENT.fetch_add(new_size, Ordering::Relaxed);
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Peak heap growth while `f` runs, beyond what was allocated before it.
fn peak_growth<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (PEAK.load(Ordering::Relaxed) - base, out)
}

/// A JSON array of `item` repeated to about `bytes` bytes (`item` may use `{i}` for a counter
/// in base 36, for unique keys).
fn repeated(open: &str, item: &str, close: &str, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 64);
    out.push_str(open);
    let mut i = 0usize;
    while out.len() < bytes {
        if i > 0 {
            out.push(',');
        }
        if item.contains("{i}") {
            out.push_str(&item.replace("{i}", &base36(i)));
        } else {
            out.push_str(item);
        }
        i += 1;
    }
    out.push_str(close);
    out
}

fn base36(mut n: usize) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    loop {
        s.push(digits[n % 36]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap()
}

const SHAPES: [(&str, &str, &str, &str); 9] = [
    ("numbers", "[", "1", "]"),
    ("floats", "[", "1.5", "]"),
    ("nulls", "[", "null", "]"),
    ("empty arrays", "[", "[]", "]"),
    ("empty objects", "[", "{}", "]"),
    ("keys", "{", "\"{i}\":1", "}"),
    ("short strings", "[", "\"a\"", "]"),
    ("escapes", "[", "\"\\n\"", "]"),
    ("nested pairs", "[", "[[1]]", "]"),
];

fn request_with_state(state: &str) -> Vec<u8> {
    format!(
        r#"{{"model":"m","questions":{{"q":{{"type":"noul","instructions":"x?"}}}},"state":{state}}}"#
    )
    .into_bytes()
}

#[test]
fn parse_memory_is_bounded() {
    let limits = Limits::workers();
    let verbose = std::env::var_os("CLEF_PARSE_MEMORY_REPORT").is_some();
    // Bodies under the item budget: the ratio of peak heap to body bytes.
    let mut worst = 0.0f64;
    for (name, open, item, close) in SHAPES {
        let state = repeated(open, item, close, 1 << 20);
        let body = request_with_state(&state);
        let (peak, parsed) = peak_growth(|| parse_request(&body, &limits));
        let ratio = peak as f64 / body.len() as f64;
        if verbose {
            eprintln!(
                "{name:>14}: 1 MiB body, ok={}, peak {:.1} MB, {ratio:.1} bytes per body byte",
                parsed.is_ok(),
                peak as f64 / 1e6
            );
        }
        assert!(parsed.is_ok(), "{name}: {:?}", parsed.as_ref().err());
        drop(parsed);
        worst = worst.max(ratio);
        // The bare document too (no item budget): the ratio of the representation alone.
        let (peak, parsed) = peak_growth(|| parse_json_with_depth(state.as_bytes(), 256));
        assert!(parsed.is_ok());
        drop(parsed);
        let ratio = peak as f64 / state.len() as f64;
        if verbose {
            eprintln!("{name:>14}: bare document, {ratio:.1} bytes per byte");
        }
        assert!(ratio <= 28.0, "{name}: {ratio:.1} bytes per byte");
    }
    // Measured: 26.7 for `[[],[],...]` and `[{},{},...]` (a 32-byte value per 3 bytes, and the
    // outer array's growth counted as a copy); 33.0 (numbers) and 67.0 (`[[1]]`) before.
    assert!(worst <= 28.0, "worst {worst:.1} bytes per body byte");

    // Bodies at the 13 MiB limit: refused (413) with the peak bounded by the item budget, not
    // by the body. The body itself (13 MiB) is allocated before the measurement.
    for (name, open, item, close) in SHAPES {
        let state = repeated(open, item, close, limits.max_body_bytes - 200);
        let body = request_with_state(&state);
        drop(state);
        assert!(body.len() <= limits.max_body_bytes);
        let (peak, parsed) = peak_growth(|| parse_request(&body, &limits));
        if verbose {
            eprintln!(
                "{name:>14}: 13 MiB body, peak {:.1} MB beyond the body",
                peak as f64 / 1e6
            );
        }
        let Err(err) = parsed else {
            panic!("{name}: a 13 MiB body was accepted")
        };
        assert_eq!(
            (err.status, err.code),
            (413, 5021),
            "{name}: {}",
            err.message
        );
        assert!(err.message.contains("before tokenizing"), "{}", err.message);
        assert!(
            peak + body.len() < 100_000_000,
            "{name}: peak {peak} bytes beyond a {} byte body",
            body.len()
        );
    }

    // A 13 MB string state is one item: parsed whole, in one allocation of its size.
    let body = request_with_state(&format!("\"{}\"", "word ".repeat(2_600_000)));
    let (peak, parsed) = peak_growth(|| parse_request(&body, &limits));
    assert!(parsed.is_ok());
    drop(parsed);
    assert!(peak < body.len() + 1_000_000, "string state: peak {peak}");

    // Deep nesting stays refused, also at the body limit.
    let deep = request_with_state(&"[".repeat(limits.max_body_bytes - 200));
    let (peak, parsed) = peak_growth(|| parse_request(&deep, &limits));
    let Err(err) = parsed else {
        panic!("deep nesting was accepted")
    };
    assert_eq!((err.status, err.code), (422, 5012), "{}", err.message);
    assert!(peak < 1_000_000, "deep nesting: peak {peak}");
    let _ = DEFAULT_MAX_DEPTH;
}
