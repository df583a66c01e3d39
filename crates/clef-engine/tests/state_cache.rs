//! The state cache (docs/state-cache.md): a request about a state already read starts at the
//! end of the state and answers the same bytes as a cold run; a hit is never another state's
//! answer; concurrent requests for a new state compute it once; the budget holds.

use clef_api::{BatchRequest, Json, Limits, Request};
use clef_encode::Truncation;
use clef_engine::{CacheUse, DecideOptions, Decision, Engine, EngineConfig, StateCacheConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn config(budget_bytes: usize) -> EngineConfig {
    EngineConfig {
        limits: Limits::reference(),
        // the golden states are short: keep every one
        state_cache: StateCacheConfig {
            budget_bytes,
            min_tokens: 1,
        },
        ..Default::default()
    }
}

fn engine_at(dir: &Path, budget_bytes: usize) -> Engine {
    // Run once per instruction set (.ci/run): fail unless CLEF_ISA took effect.
    clef_testkit::isa::under_test();
    Engine::load(dir, config(budget_bytes)).unwrap()
}

fn engine(budget_bytes: usize) -> Engine {
    engine_of("tiny-a", budget_bytes)
}

fn engine_of(model: &str, budget_bytes: usize) -> Engine {
    engine_at(&fixtures().join("models").join(model), budget_bytes)
}

struct Golden {
    name: String,
    req: Request,
    max_length: Option<usize>,
}

fn goldens(e: &Engine) -> Vec<Golden> {
    goldens_of(e, "tiny-a")
}

fn goldens_of(e: &Engine, model: &str) -> Vec<Golden> {
    clef_testkit::fixtures::golden_files(model)
        .iter()
        .map(|p| {
            let raw = clef_api::parse_json(&std::fs::read(p).unwrap()).unwrap();
            let Json::Object(obj) = &raw else { panic!() };
            let body = obj.get("request").unwrap().to_json_string();
            let max_length = match obj.get("max_length") {
                Some(Json::Number(n)) => Some(n.as_f64() as usize),
                _ => None,
            };
            Golden {
                name: p.file_stem().unwrap().to_string_lossy().into_owned(),
                req: e.parse(body.as_bytes()).unwrap(),
                max_length,
            }
        })
        .collect()
}

fn options(max_length: Option<usize>) -> DecideOptions<'static> {
    DecideOptions {
        truncation: Truncation::State,
        max_length,
        ..Default::default()
    }
}

/// The raw outputs as bits: equal means bit-identical.
fn bits(d: &Decision) -> Vec<Vec<u32>> {
    d.logits
        .iter()
        .map(|q| q.iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// Other questions about the same state and media.
fn with_other_questions(e: &Engine, req: &Request) -> Request {
    let q = e
        .parse(
            br#"{"model": "clef", "state": "", "questions": {"elsewhere": {"type": "choice",
            "instructions": "Which part matters most?",
            "criteria": {"first": "The beginning", "last": "The end"}}}}"#,
        )
        .unwrap();
    Request {
        questions: q.questions,
        ..req.clone()
    }
}

fn batch_of(sets: &[&Request]) -> BatchRequest {
    BatchRequest {
        shared: Request {
            questions: vec![],
            ..sets[0].clone()
        },
        question_sets: sets.iter().map(|r| r.questions.clone()).collect(),
    }
}

#[test]
fn every_golden_answers_the_same_bytes_cold_after_another_request_and_in_a_batch() {
    let all = goldens(&engine(0));
    assert!(all.iter().any(|g| g.req.has_media()));
    assert!(all.iter().any(|g| !g.req.videos.is_empty()));
    assert!(all.iter().any(|g| g.max_length.is_some_and(|m| m < 16_384)));
    for model in ["tiny-a", "nano"] {
        same_bytes_three_ways(model);
    }
}

fn same_bytes_three_ways(model: &str) {
    let cached = engine_of(model, 64 << 20);
    let off = engine_of(model, 0);
    let all = goldens_of(&cached, model);
    assert!(!all.is_empty(), "{model}");
    for g in &all {
        let opts = options(g.max_length);
        let name = &g.name;
        let cold = cached.decide(&g.req, &opts).unwrap();
        assert_eq!(cold.state_cache, CacheUse::Miss, "{name}");
        let uncached = off.decide(&g.req, &opts).unwrap();
        assert_eq!(uncached.state_cache, CacheUse::Off, "{name}");
        assert_eq!(bits(&uncached), bits(&cold), "{name}: cache off vs cold");

        let other = with_other_questions(&cached, &g.req);
        let o = cached.decide(&other, &opts).unwrap();
        if cold.dropped_state_tokens() == 0 {
            // with a truncated state the kept state tokens depend on the schema's length
            assert_eq!(o.state_cache, CacheUse::Hit, "{name}: other questions");
            assert_eq!(o.timings.resumed_rows, cold.encoded.state_span().end);
            assert_eq!(o.vision_s, 0.0, "{name}: a hit runs no vision tower");
        }
        let again = cached.decide(&g.req, &opts).unwrap();
        assert_eq!(again.state_cache, CacheUse::Hit, "{name}");
        assert_eq!(again.encoded.input_ids, cold.encoded.input_ids, "{name}");
        assert_eq!(bits(&again), bits(&cold), "{name}: after a hit");

        // in a batch, on an engine whose cache is off (the batch shares its own prefix) and on
        // the caching one
        let mut batch = batch_of(&[&other, &g.req]);
        let results = off.decide_batch(&mut batch, &opts).unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(bits(&results[1]), bits(&cold), "{name}: in a batch");
        assert_eq!(
            bits(&results[0]),
            bits(&o),
            "{name}: the other set in a batch"
        );
        if cold.dropped_state_tokens() == 0 {
            assert_eq!(results[1].state_cache, CacheUse::Hit, "{name}");
            assert_eq!(
                results[1].timings.resumed_rows,
                cold.encoded.state_span().end
            );
        }
        let results = cached.decide_batch(&mut batch, &opts).unwrap();
        assert_eq!(bits(&results[1]), bits(&cold), "{name}: in a cached batch");
    }
}

/// An image of `w`×`h` whose pixels follow `seed`, as a PNG data URL.
fn png(w: u32, h: u32, seed: u32, change: Option<(u32, u32)>) -> String {
    use base64::Engine as _;
    let mut img = image::RgbImage::from_fn(w, h, |x, y| {
        let v = (x * 7 + y * 13 + seed * 31) % 251;
        image::Rgb([v as u8, (v * 3 % 256) as u8, (255 - v) as u8])
    });
    if let Some((x, y)) = change {
        let p = img.get_pixel_mut(x, y);
        p.0[0] ^= 0x80;
    }
    let mut bytes = Vec::new();
    img.write_to(
        &mut std::io::Cursor::new(&mut bytes),
        image::ImageFormat::Png,
    )
    .unwrap();
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn request(e: &Engine, state: &str, images: &[String]) -> Request {
    let body = serde_json::json!({
        "model": "clef",
        "state": state,
        "images": images,
        "questions": {"urgent": {"type": "noul", "instructions": "Is this urgent?"}},
    });
    e.parse(body.to_string().as_bytes()).unwrap()
}

/// `b` after `a` on a caching engine: a miss, answered as a cold run of `b` answers it.
fn misses_after(cached: &Engine, off: &Engine, a: &Request, b: &Request, what: &str) {
    let opts = options(None);
    assert_ne!(cached.decide(a, &opts).unwrap().state_cache, CacheUse::Off);
    let d = cached.decide(b, &opts).unwrap();
    assert_eq!(d.state_cache, CacheUse::Miss, "{what}");
    assert_eq!(bits(&d), bits(&off.decide(b, &opts).unwrap()), "{what}");
}

#[test]
fn a_hit_is_never_another_states_answer() {
    let cached = engine(64 << 20);
    let off = engine(0);
    let opts = options(None);
    let cut = |r: &Request| {
        let d = off.decide(r, &opts).unwrap();
        d.encoded.input_ids[..d.encoded.state_span().end].to_vec()
    };

    // one token of the state
    let a = request(&cached, "Order 4 failed at the payment step.", &[]);
    let b = request(&cached, "Order 7 failed at the payment step.", &[]);
    let (ia, ib) = (cut(&a), cut(&b));
    assert_eq!(ia.len(), ib.len());
    assert_eq!(ia.iter().zip(&ib).filter(|(x, y)| x != y).count(), 1);
    misses_after(&cached, &off, &a, &b, "one state token");

    // one image's pixels (same size: the same pad ids, so only the content tells them apart)
    let a = request(
        &cached,
        "Two screenshots.",
        &[png(64, 48, 1, None), png(32, 32, 2, None)],
    );
    let b = request(
        &cached,
        "Two screenshots.",
        &[png(64, 48, 1, Some((10, 20))), png(32, 32, 2, None)],
    );
    assert_eq!(cut(&a), cut(&b));
    misses_after(&cached, &off, &a, &b, "one pixel");

    // media order (two images of one size: swapping them keeps every id)
    let (p, q) = (png(48, 48, 3, None), png(48, 48, 4, None));
    let a = request(&cached, "Two photos.", &[p.clone(), q.clone()]);
    let b = request(&cached, "Two photos.", &[q, p]);
    assert_eq!(cut(&a), cut(&b));
    misses_after(&cached, &off, &a, &b, "media order");
    // and the same media again is a hit that skips decoding
    let d = cached.decide(&a, &opts).unwrap();
    assert_eq!(
        (d.state_cache, d.media_s, d.vision_s),
        (CacheUse::Hit, 0.0, 0.0)
    );
}

/// Copies a model folder, so that its weights can be changed.
fn copy_model(to: &Path) {
    let from = fixtures().join("models/tiny-a");
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(&from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Nudges every value of the final norm's weight (BF16) by a few ulps, in place.
fn change_weights(dir: &Path) {
    let path = dir.join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let t = &header["model.language_model.norm.weight"];
    assert_eq!(t["dtype"], "BF16");
    let (a, b) = (
        t["data_offsets"][0].as_u64().unwrap() as usize,
        t["data_offsets"][1].as_u64().unwrap() as usize,
    );
    for v in bytes[8 + n + a..8 + n + b].chunks_exact_mut(2) {
        let x = u16::from_le_bytes([v[0], v[1]]).wrapping_add(40);
        v.copy_from_slice(&x.to_le_bytes());
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, bytes).unwrap();
}

#[test]
fn a_reloaded_model_does_not_read_the_states_of_the_weights_before() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    copy_model(&dir);
    let first = engine_at(&dir, 64 << 20);
    let cache = Arc::new(clef_engine::StateCache::new(
        first.state_cache().config().clone(),
    ));
    let mut first = first;
    first.share_state_cache(cache.clone());
    let req = request(
        &first,
        "The checkout fails for every customer since noon.",
        &[],
    );
    let opts = options(None);
    let before = first.decide(&req, &opts).unwrap();
    assert_eq!(before.state_cache, CacheUse::Miss);

    // the same weights loaded again share the kept state ...
    let mut same = engine_at(&dir, 64 << 20);
    same.share_state_cache(cache.clone());
    let d = same.decide(&req, &opts).unwrap();
    assert_eq!(d.state_cache, CacheUse::Hit);
    assert_eq!(bits(&d), bits(&before));

    // ... changed weights do not
    change_weights(&dir);
    let mut changed = engine_at(&dir, 64 << 20);
    changed.share_state_cache(cache);
    let d = changed.decide(&req, &opts).unwrap();
    assert_eq!(
        d.state_cache,
        CacheUse::Miss,
        "a state of the old weights was read"
    );
    let cold = engine_at(&dir, 0).decide(&req, &opts).unwrap();
    assert_eq!(bits(&d), bits(&cold));
    assert_ne!(bits(&d), bits(&before), "the change must change the answer");
}

#[test]
fn concurrent_requests_for_one_new_state_compute_it_once() {
    let e = engine(64 << 20);
    let g = goldens(&e)
        .into_iter()
        .find(|g| g.name == "a18_long_state")
        .unwrap();
    let other = with_other_questions(&e, &g.req);
    let opts = options(g.max_length);
    let uses: Vec<CacheUse> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (e, req, opts) = (&e, if i % 2 == 0 { &g.req } else { &other }, &opts);
                s.spawn(move || e.decide(req, opts).unwrap().state_cache)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let stats = e.state_cache().stats();
    assert_eq!(
        (stats.misses, stats.hits, stats.entries),
        (1, 3, 1),
        "{uses:?}"
    );
    assert_eq!(uses.iter().filter(|u| **u == CacheUse::Miss).count(), 1);
}

#[test]
fn the_budget_holds_over_many_states() {
    let probe = engine(0);
    let state = |i: usize| {
        format!(
            "Ticket {i}: {}",
            "the export job stalls at the last step. ".repeat(8)
        )
    };
    let one = probe
        .decide(&request(&probe, &state(0), &[]), &options(None))
        .unwrap();
    let bytes = probe.model().prefix_bytes(one.encoded.state_span().end);
    // room for about three states
    let budget = bytes * 3 + bytes / 2;
    let e = engine(budget);
    for i in 0..12 {
        let d = e
            .decide(&request(&e, &state(i), &[]), &options(None))
            .unwrap();
        assert_eq!(d.state_cache, CacheUse::Miss);
        let s = e.state_cache().stats();
        assert!(s.bytes <= budget, "{} bytes kept, budget {budget}", s.bytes);
        assert!(s.entries <= 3);
    }
    let s = e.state_cache().stats();
    assert_eq!((s.misses, s.entries, s.evictions), (12, 3, 9));
    // the last three are kept, the first are gone
    let hit = e
        .decide(&request(&e, &state(11), &[]), &options(None))
        .unwrap();
    assert_eq!(hit.state_cache, CacheUse::Hit);
    let gone = e
        .decide(&request(&e, &state(0), &[]), &options(None))
        .unwrap();
    assert_eq!(gone.state_cache, CacheUse::Miss);

    // a state larger than the budget, or shorter than the minimum, is not consulted
    let tiny = engine(bytes / 2);
    let d = tiny
        .decide(&request(&tiny, &state(1), &[]), &options(None))
        .unwrap();
    assert_eq!(d.state_cache, CacheUse::Off);
    let picky = Engine::load(
        &fixtures().join("models/tiny-a"),
        EngineConfig {
            state_cache: StateCacheConfig {
                budget_bytes: 64 << 20,
                min_tokens: 10_000,
            },
            ..config(0)
        },
    )
    .unwrap();
    let d = picky
        .decide(&request(&picky, &state(1), &[]), &options(None))
        .unwrap();
    assert_eq!(d.state_cache, CacheUse::Off);
    assert_eq!(picky.state_cache().stats().misses, 0);
}

/// Every set of a batch is encoded before any runs: a set whose prompt does not fit is refused
/// by index and nothing ran (the cancellation poll, called at every chunk of a run, was called
/// only before encoding each set).
#[test]
fn a_batch_checks_every_set_before_running_one() {
    let e = engine(0);
    let small = e
        .parse(br#"{"model": "clef", "state": "", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}"#)
        .unwrap();
    let many: String = (0..60)
        .map(|i| {
            format!(
                r#""q{i}": {{"type": "noul", "instructions": "Is check {i} of the list true?"}}"#
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let big = e
        .parse(format!(r#"{{"model": "clef", "state": "", "questions": {{{many}}}}}"#).as_bytes())
        .unwrap();
    let state = Json::String("word ".repeat(7_750));
    let fits = Request {
        state: state.clone(),
        ..small
    };
    let too_long = Request { state, ..big };
    let polls = std::sync::atomic::AtomicUsize::new(0);
    let counting = || {
        polls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        false
    };
    let opts = DecideOptions {
        cancelled: &counting,
        ..Default::default()
    };
    assert!(e.decide(&fits, &opts).is_ok());
    // the prefill polls at every chunk (over a hundred here)
    let run_polls = polls.load(std::sync::atomic::Ordering::Relaxed);
    assert!(run_polls > 100, "the run polled {run_polls} times");
    polls.store(0, std::sync::atomic::Ordering::Relaxed);
    let err = e
        .decide_batch(&mut batch_of(&[&fits, &too_long]), &opts)
        .unwrap_err();
    let clef_engine::EngineError::Refused(api) = err else {
        panic!("{err:?}")
    };
    assert_eq!(api.status, 413, "{}", api.message);
    assert!(
        api.message.starts_with("question_sets[1]: "),
        "{}",
        api.message
    );
    // once before encoding each set, and no chunk ran
    let polls = polls.load(std::sync::atomic::Ordering::Relaxed);
    assert!(polls <= 2, "{polls} polls: a set ran");
}
