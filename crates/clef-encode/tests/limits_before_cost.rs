//! Limits before cost (docs/encoding.md, *Bounded tokenizing*; docs/api.md, *Parse memory*): an
//! oversize state is refused (413) before it is tokenized whole, with the peak heap bounded,
//! measured by a counting global allocator (deterministic, unlike RSS or wall time); a state
//! just under and just over its budget still gets the tokenizer's exact decision. One test
//! function, so that nothing else allocates meanwhile.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use clef_api::{parse_request, ApiError, Limits};
use clef_encode::{EncodeError, EncodeOptions, Encoder, MediaLayout, Truncation, CHUNK_BYTES};
use common::qwen;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// Requested sizes; a `realloc` counts the old and the new block together (as if it copied).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let before = CURRENT.load(Ordering::Relaxed);
        PEAK.fetch_max(before + new_size, Ordering::Relaxed);
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

/// The whole path of a request: parse and validate (workers limits), then encode with the
/// budget of `max_context` and no truncation.
fn decide(enc: &Encoder, body: &[u8], truncation: Truncation) -> Result<usize, ApiError> {
    let limits = Limits::workers();
    let req = parse_request(body, &limits)?;
    let opts = EncodeOptions {
        max_length: limits.max_context,
        truncation,
    };
    let encoded = enc.encode(&req, &MediaLayout::default(), &opts)?;
    Ok(encoded.state_tokens_kept)
}

fn body_with_state(state_json: &str) -> Vec<u8> {
    format!(
        r#"{{"model":"m","questions":{{"q":{{"type":"noul","instructions":"Is it?"}}}},"state":{state_json}}}"#
    )
    .into_bytes()
}

/// A JSON string literal of `text` repeated to about `bytes` bytes (`text` needs no escaping).
fn string_state(text: &str, bytes: usize) -> String {
    format!("\"{}\"", text.repeat(bytes / text.len()))
}

const MB: usize = 1_000_000;

/// `VmHWM` and `VmRSS` of this process in kB (report mode only: Linux, informative).
fn rss_kb() -> (usize, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn refused(name: &str, body: &[u8], truncation: Truncation, peak_limit: usize) -> ApiError {
    let enc = qwen();
    let report = std::env::var_os("CLEF_LIMITS_REPORT").is_some();
    if report {
        // Resets the high-water mark of the resident set (Linux).
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }
    let rss_before = rss_kb().1;
    let started = std::time::Instant::now();
    let (peak, out) = peak_growth(|| decide(enc, body, truncation));
    let elapsed = started.elapsed();
    let rss_growth_mb = rss_kb().0.saturating_sub(rss_before) as f64 / 1e3;
    let Err(err) = out else {
        panic!("{name}: accepted")
    };
    assert_eq!(
        (err.status, err.code),
        (413, 5021),
        "{name}: {}",
        err.message
    );
    assert!(
        body.len() + peak < peak_limit,
        "{name}: peak {:.1} MB beyond a {:.1} MB body",
        peak as f64 / 1e6,
        body.len() as f64 / 1e6
    );
    if report {
        eprintln!(
            "{name}: {:.1} MB body, heap peak {:.1} MB beyond it, RSS peak growth {rss_growth_mb:.1} \
             MB, {:.0} ms: {}",
            body.len() as f64 / 1e6,
            peak as f64 / 1e6,
            elapsed.as_secs_f64() * 1e3,
            err.message
        );
    }
    err
}

#[test]
fn oversize_states_are_refused_before_their_cost() {
    let enc = qwen();
    let limits = Limits::workers();
    let max_body = limits.max_body_bytes - 200;

    // A 13 MB array of numbers: refused while parsing (the item budget).
    let numbers = body_with_state(&format!("[{}1]", "1,".repeat(max_body / 2 - 1)));
    let err = refused("13 MB numbers", &numbers, Truncation::Refuse, 100 * MB);
    assert!(err.message.contains("while parsing"), "{}", err.message);
    drop(numbers);

    // An array of numbers under the item budget (1.5 MB): parsed, then refused before
    // tokenizing (each digit is a token).
    let numbers = body_with_state(&format!("[{}1]", "12,".repeat(500_000)));
    let err = refused("1.5 MB numbers", &numbers, Truncation::Refuse, 100 * MB);
    assert!(err.message.contains("before tokenizing"), "{}", err.message);
    drop(numbers);

    // A 13 MB string state, ASCII or CJK: refused before tokenizing.
    let ascii = body_with_state(&string_state("The state of things. ", max_body));
    let err = refused("13 MB ASCII string", &ascii, Truncation::Refuse, 100 * MB);
    assert!(err.message.contains("before tokenizing"), "{}", err.message);
    drop(ascii);
    let cjk = body_with_state(&string_state("状态的描述", max_body));
    let err = refused("13 MB CJK string", &cjk, Truncation::Refuse, 100 * MB);
    assert!(err.message.contains("before tokenizing"), "{}", err.message);
    drop(cjk);

    // A state the lower bound lets through (1.5 MB of short words: about 6 bytes a token, so
    // the bound says 12k while it is 300k tokens): tokenizing stops once the budget is passed.
    let words = body_with_state(&string_state(" word one, word two;", 1_500_000));
    let err = refused("1.5 MB words", &words, Truncation::Refuse, 60 * MB);
    assert!(
        err.message.contains("tokenizing stopped"),
        "{}",
        err.message
    );
    // With truncation, the whole state is counted (the reference reports the count), but
    // only the kept ids are stored: memory stays bounded.
    let (peak, kept) = peak_growth(|| decide(enc, &words, Truncation::State));
    let kept = kept.unwrap();
    assert!(kept > 16_000 && kept < limits.max_context, "{kept}");
    assert!(peak < 60 * MB, "truncation: peak {peak}");
    drop(words);

    // Deep nesting stays refused.
    let deep = body_with_state(&"[".repeat(max_body));
    let (_, out) = peak_growth(|| decide(enc, &deep, Truncation::Refuse));
    let Err(err) = out else {
        panic!("deep nesting accepted")
    };
    assert_eq!((err.status, err.code), (422, 5012), "{}", err.message);
}

/// A state of several chunks whose token count is exactly the budget fits; one token less of
/// budget refuses it with the exact count; truncation keeps exactly the whole text's first ids.
#[test]
fn the_decision_at_the_budget_is_the_tokenizers() {
    let enc = qwen();
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 4 * CHUNK_BYTES {
        text.push_str(&format!("Item {i}: état {} ok, 中文 done.\n", i * 31 % 97));
        i += 1;
    }
    let whole = enc.tokenize(&text).unwrap();
    let body = body_with_state(&clef_api::Json::from(text.as_str()).to_json_string());
    let req = parse_request(&body, &Limits::workers()).unwrap();
    let fits = |max_length: usize, truncation| {
        enc.encode(
            &req,
            &MediaLayout::default(),
            &EncodeOptions {
                max_length,
                truncation,
            },
        )
    };
    let with_room = fits(100_000, Truncation::Refuse).unwrap();
    assert_eq!(with_room.state_tokens, whole.len());
    let fixed = with_room.input_ids.len() - whole.len();
    let exact = fits(fixed + whole.len(), Truncation::Refuse).unwrap();
    assert_eq!(exact.input_ids, with_room.input_ids);
    match fits(fixed + whole.len() - 1, Truncation::Refuse) {
        Err(EncodeError::PromptTooLong {
            tokens,
            state_tokens,
            maximum,
        }) => assert_eq!(
            (tokens, state_tokens, maximum),
            (fixed + whole.len(), whole.len(), fixed + whole.len() - 1)
        ),
        other => panic!("{other:?}"),
    }
    // Far over: still refused, counting stopped early (a lower bound).
    match fits(fixed + 1000, Truncation::Refuse) {
        Err(EncodeError::StateTooLong { state_at_least, .. }) => {
            assert!(state_at_least > 1000 && state_at_least < whole.len())
        }
        other => panic!("{other:?}"),
    }
    // Truncation keeps the first ids of the whole text, whatever the budget.
    for budget in [1, 999, 4000, whole.len() - 1] {
        let cut = fits(fixed + budget, Truncation::State).unwrap();
        assert_eq!(cut.state_tokens_kept, budget);
        let start = cut.media_offset;
        assert_eq!(&cut.input_ids[start..start + budget], &whole[..budget]);
        assert_eq!(cut.state_tokens, whole.len());
    }
}
