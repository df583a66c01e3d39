//! The state cache: what a request's rows up to the end of its state leave for the rows after
//! them (a [`PrefixState`]), kept so that a later request about the same state, with other
//! questions, runs only its own schema tokens (encoding.md §9, docs/state-cache.md).
//!
//! One cache per engine, shared by every thread that runs it: LRU by bytes under a budget, with
//! one computation per new state (concurrent requests for a state being computed wait for it
//! instead of computing it again). A key holds everything the kept state depends on, compared in
//! full on every lookup, so a hit can only be the same state.

use clef_encode::MediaLayout;
use clef_media::PatchGrid;
use clef_model::PrefixState;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// The default budget: room for one full-context (16k-token) Clef-Flash state, or a dozen of
/// 2k tokens (about 68 KiB per token plus 50 MiB, docs/state-cache.md), small beside the
/// weights of the machines that run these models.
pub const DEFAULT_BUDGET_MIB: usize = 2048;
/// States (media plus state tokens) shorter than this are not kept: they cost little more to
/// run again than the question tokens after them.
pub const DEFAULT_MIN_TOKENS: usize = 256;

/// How often a request waiting for another's computation of its state checks whether it was
/// cancelled.
const WAIT_POLL: Duration = Duration::from_millis(20);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateCacheConfig {
    /// Bytes of kept states at most; 0 turns the cache off.
    pub budget_bytes: usize,
    /// Media plus state tokens below which a request's state is not kept.
    pub min_tokens: usize,
}

impl Default for StateCacheConfig {
    fn default() -> Self {
        StateCacheConfig {
            budget_bytes: DEFAULT_BUDGET_MIB << 20,
            min_tokens: DEFAULT_MIN_TOKENS,
        }
    }
}

impl StateCacheConfig {
    pub fn off() -> Self {
        StateCacheConfig {
            budget_bytes: 0,
            ..Default::default()
        }
    }
}

/// What a kept state depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StateKey {
    /// The weights and every setting of the run that changes the state's bytes (the engine's
    /// [`crate::Engine::run_digest`]).
    pub run: [u8; 32],
    /// The prompt's ids up to the cut (prefix, media piece, state).
    pub ids: Vec<u32>,
    /// The media's content and order ([`crate::media::media_digest`]): images that differ only
    /// in their pixels have the same pad ids.
    pub media: Option<[u8; 32]>,
}

/// What the encoder and the rotary positions need of a request's media, kept with a state so a
/// hit needs neither the media decoders nor the vision tower.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaMemo {
    pub layout: MediaLayout,
    /// Per item, images then videos: its patch grid.
    pub grids: Vec<PatchGrid>,
}

impl MediaMemo {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.grids.len() * std::mem::size_of::<PatchGrid>()
            + self
                .layout
                .videos
                .iter()
                .map(|v| v.groups.len() * std::mem::size_of::<clef_encode::VideoGroup>())
                .sum::<usize>()
            + self.layout.images.len() * std::mem::size_of::<clef_encode::ImageLayout>()
    }
}

/// A kept state and the media memo of the request that computed it.
pub struct CachedPrefix {
    pub prefix: PrefixState,
    pub media: Option<Arc<MediaMemo>>,
}

impl CachedPrefix {
    /// Bytes charged to the budget for it under `key`.
    fn bytes(&self, key: &StateKey) -> usize {
        self.prefix.bytes()
            + key.ids.len() * std::mem::size_of::<u32>()
            + self.media.as_ref().map_or(0, |m| m.bytes())
    }
}

/// How a request used the cache (the `x-clef-state-cache` header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// Started from a kept state.
    Hit,
    /// Consulted, and computed the state (kept if it fits the budget).
    Miss,
    /// Not consulted: the cache is off, the state is under the minimum, or it could not fit
    /// the budget.
    Off,
}

impl CacheUse {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheUse::Hit => "hit",
            CacheUse::Miss => "miss",
            CacheUse::Off => "off",
        }
    }
}

/// Counters and sizes, for `/metrics` and `/v1/models`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateCacheStats {
    pub budget_bytes: usize,
    pub min_tokens: usize,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub bytes: usize,
    pub entries: usize,
}

enum Slot {
    Ready {
        value: Arc<CachedPrefix>,
        bytes: usize,
        used: u64,
    },
    /// A request is computing it.
    Pending,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<StateKey, Slot>,
    /// Media memos by run and media digest, alive while a kept state holds them.
    media: HashMap<([u8; 32], [u8; 32]), Weak<MediaMemo>>,
    bytes: usize,
    /// Bytes set aside for states being computed (kept plus reserved stay within the budget,
    /// so a state is never allocated beyond it).
    reserved: usize,
    clock: u64,
}

pub struct StateCache {
    config: StateCacheConfig,
    inner: Mutex<Inner>,
    changed: Condvar,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

/// The result of a lookup.
pub enum Lookup<'a> {
    Hit(Arc<CachedPrefix>),
    /// Nobody holds or computes this state: the caller computes it and hands it to
    /// [`Flight::fulfil`]; other requests for it wait meanwhile. Dropping the flight (an error,
    /// a cancellation) lets the next waiter compute it.
    Miss(Flight<'a>),
}

/// A request's claim to compute a state.
pub struct Flight<'a> {
    cache: &'a StateCache,
    key: Option<StateKey>,
    /// What [`StateCache::lookup`] set aside for the state.
    reserved: usize,
}

/// The request was cancelled while it waited for another's computation.
#[derive(Debug, PartialEq, Eq)]
pub struct Cancelled;

impl StateCache {
    pub fn new(config: StateCacheConfig) -> Self {
        StateCache {
            config,
            inner: Mutex::new(Inner::default()),
            changed: Condvar::new(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> &StateCacheConfig {
        &self.config
    }

    /// Whether a state of `tokens` media plus state tokens, keeping `bytes`, is worth a
    /// lookup: the cache is on, the state is long enough, and it could be kept at all.
    pub fn admits(&self, tokens: usize, bytes: usize) -> bool {
        self.config.budget_bytes > 0
            && tokens >= self.config.min_tokens
            && bytes <= self.config.budget_bytes
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the map consistent (every update is a single
        // insert or remove), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The media memo kept for this media digest under this run digest, if a kept state holds
    /// one.
    pub fn media_memo(&self, run: &[u8; 32], digest: &[u8; 32]) -> Option<Arc<MediaMemo>> {
        self.lock()
            .media
            .get(&(*run, *digest))
            .and_then(Weak::upgrade)
    }

    /// The kept state for `key`, or the claim to compute it, with `bytes` (what the state will
    /// be charged) set aside first, evicting the least recently used states as needed. Waits
    /// while another request computes it, polling `cancelled`.
    pub fn lookup(
        &self,
        key: &StateKey,
        bytes: usize,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Lookup<'_>, Cancelled> {
        let mut inner = self.lock();
        loop {
            inner.clock += 1;
            let now = inner.clock;
            // Some(Some(v)): kept; Some(None): being computed; None: absent.
            let found = match inner.entries.get_mut(key) {
                Some(Slot::Ready { value, used, .. }) => {
                    *used = now;
                    Some(Some(value.clone()))
                }
                Some(Slot::Pending) => Some(None),
                None => None,
            };
            match found {
                Some(Some(value)) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(Lookup::Hit(value));
                }
                Some(None) => {
                    if cancelled() {
                        return Err(Cancelled);
                    }
                    inner = self
                        .changed
                        .wait_timeout(inner, WAIT_POLL)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                None => {
                    inner.entries.insert(key.clone(), Slot::Pending);
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    let reserved = if bytes <= self.config.budget_bytes {
                        self.evict_for(&mut inner, bytes);
                        inner.reserved += bytes;
                        bytes
                    } else {
                        0
                    };
                    return Ok(Lookup::Miss(Flight {
                        cache: self,
                        key: Some(key.clone()),
                        reserved,
                    }));
                }
            }
        }
    }

    /// Evict the least recently used kept states until `bytes` more fit beside what is kept
    /// and reserved (or nothing is left to evict).
    fn evict_for(&self, inner: &mut Inner, bytes: usize) {
        while inner.bytes + inner.reserved + bytes > self.config.budget_bytes {
            let oldest = inner
                .entries
                .iter()
                .filter_map(|(k, s)| match s {
                    Slot::Ready { used, .. } => Some((*used, k)),
                    Slot::Pending => None,
                })
                .min_by_key(|(used, _)| *used)
                .map(|(_, k)| k.clone());
            let Some(oldest) = oldest else { break };
            if let Some(Slot::Ready { bytes: b, .. }) = inner.entries.remove(&oldest) {
                inner.bytes -= b;
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Keep `value` under `key` (replacing its pending slot and its reservation), evicting the
    /// least recently used states until it fits; one that cannot fit is not kept.
    fn store(&self, key: StateKey, value: Arc<CachedPrefix>, reserved: usize) {
        let bytes = value.bytes(&key);
        let mut inner = self.lock();
        inner.entries.remove(&key);
        inner.reserved -= reserved;
        if bytes <= self.config.budget_bytes {
            self.evict_for(&mut inner, bytes);
        }
        if inner.bytes + inner.reserved + bytes <= self.config.budget_bytes {
            if let (Some(memo), Some(digest)) = (&value.media, key.media) {
                inner.media.insert((key.run, digest), Arc::downgrade(memo));
            }
            inner.clock += 1;
            let used = inner.clock;
            inner.bytes += bytes;
            inner
                .entries
                .insert(key, Slot::Ready { value, bytes, used });
        }
        inner.media.retain(|_, m| m.strong_count() > 0);
        drop(inner);
        self.changed.notify_all();
    }

    fn abandon(&self, key: &StateKey, reserved: usize) {
        let mut inner = self.lock();
        inner.reserved -= reserved;
        if matches!(inner.entries.get(key), Some(Slot::Pending)) {
            inner.entries.remove(key);
        }
        drop(inner);
        self.changed.notify_all();
    }

    pub fn stats(&self) -> StateCacheStats {
        let inner = self.lock();
        StateCacheStats {
            budget_bytes: self.config.budget_bytes,
            min_tokens: self.config.min_tokens,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes: inner.bytes,
            entries: inner
                .entries
                .values()
                .filter(|s| matches!(s, Slot::Ready { .. }))
                .count(),
        }
    }
}

impl Flight<'_> {
    /// Keep the computed state and wake the requests waiting for it.
    pub fn fulfil(mut self, value: Arc<CachedPrefix>) {
        if let Some(key) = self.key.take() {
            self.cache.store(key, value, self.reserved);
        }
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.cache.abandon(&key, self.reserved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_model::backbone::state::{DeltaNetState, LayerState, SequenceState};

    fn key(id: u32) -> StateKey {
        StateKey {
            run: [0; 32],
            ids: vec![id; 10],
            media: None,
        }
    }

    /// A kept state of about `kib` KiB.
    fn value(kib: usize) -> Arc<CachedPrefix> {
        Arc::new(CachedPrefix {
            prefix: PrefixState {
                rows: 10,
                backbone: SequenceState {
                    layers: vec![LayerState::DeltaNet(DeltaNetState {
                        conv: vec![],
                        ssm: vec![0.0; kib * 256],
                    })],
                    position: 10,
                },
                memory: vec![],
            },
            media: None,
        })
    }

    fn miss<'a>(cache: &'a StateCache, k: &StateKey) -> Flight<'a> {
        match cache.lookup(k, 0, &|| false).unwrap() {
            Lookup::Miss(f) => f,
            Lookup::Hit(_) => panic!("unexpected hit"),
        }
    }

    #[test]
    fn least_recently_used_states_are_evicted_to_stay_in_budget() {
        let cache = StateCache::new(StateCacheConfig {
            budget_bytes: 100 << 10,
            min_tokens: 1,
        });
        for id in 0..3 {
            miss(&cache, &key(id)).fulfil(value(40));
        }
        // three 40 KiB states in 100 KiB: the first was evicted
        let s = cache.stats();
        assert_eq!((s.entries, s.evictions, s.misses), (2, 1, 3));
        assert!(s.bytes <= 100 << 10);
        assert!(matches!(
            cache.lookup(&key(1), 0, &|| false),
            Ok(Lookup::Hit(_))
        ));
        // 1 was used last, so 2 goes next
        miss(&cache, &key(0)).fulfil(value(40));
        assert!(matches!(
            cache.lookup(&key(1), 0, &|| false),
            Ok(Lookup::Hit(_))
        ));
        let Ok(Lookup::Miss(f)) = cache.lookup(&key(2), 0, &|| false) else {
            panic!("2 should have been evicted")
        };
        drop(f);
        // larger than the budget: never kept, nothing evicted for it
        let before = cache.stats();
        miss(&cache, &key(9)).fulfil(value(200));
        let after = cache.stats();
        assert_eq!(
            (after.entries, after.evictions),
            (before.entries, before.evictions)
        );
        assert!(matches!(
            cache.lookup(&key(9), 0, &|| false),
            Ok(Lookup::Miss(_))
        ));
        assert_eq!(cache.stats().hits, 2);
    }

    #[test]
    fn a_state_being_computed_has_its_room_before_it_exists() {
        let cache = StateCache::new(StateCacheConfig {
            budget_bytes: 100 << 10,
            min_tokens: 1,
        });
        for id in 0..2 {
            miss(&cache, &key(id)).fulfil(value(40));
        }
        let Ok(Lookup::Miss(flight)) = cache.lookup(&key(5), 50 << 10, &|| false) else {
            panic!("a new state")
        };
        // 80 KiB kept + 50 KiB reserved would pass 100 KiB: the oldest went at once
        let s = cache.stats();
        assert_eq!((s.entries, s.evictions), (1, 1));
        flight.fulfil(value(40));
        let s = cache.stats();
        assert_eq!((s.entries, s.evictions), (2, 1));
        assert!(s.bytes <= 100 << 10);
        // an abandoned computation gives its room back
        let Ok(Lookup::Miss(flight)) = cache.lookup(&key(6), 15 << 10, &|| false) else {
            panic!("a new state")
        };
        drop(flight);
        // without it, 15 KiB fit beside what is kept
        miss(&cache, &key(7)).fulfil(value(15));
        assert_eq!(cache.stats().evictions, 1);
    }

    #[test]
    fn keys_differing_anywhere_do_not_share() {
        let cache = StateCache::new(StateCacheConfig {
            budget_bytes: 1 << 20,
            min_tokens: 1,
        });
        let base = key(1);
        miss(&cache, &base).fulfil(value(1));
        let mut ids = base.clone();
        ids.ids[9] = 2;
        let mut run = base.clone();
        run.run[31] = 1;
        let mut media = base.clone();
        media.media = Some([0; 32]);
        let mut shorter = base.clone();
        shorter.ids.pop();
        for other in [ids, run, media, shorter] {
            assert!(matches!(
                cache.lookup(&other, 0, &|| false),
                Ok(Lookup::Miss(_))
            ));
        }
        assert!(matches!(
            cache.lookup(&base, 0, &|| false),
            Ok(Lookup::Hit(_))
        ));
    }

    #[test]
    fn concurrent_requests_for_a_new_state_compute_it_once() {
        let cache = StateCache::new(StateCacheConfig {
            budget_bytes: 1 << 20,
            min_tokens: 1,
        });
        let computed = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| match cache.lookup(&key(7), 0, &|| false).unwrap() {
                    Lookup::Hit(_) => {}
                    Lookup::Miss(f) => {
                        computed.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(100));
                        f.fulfil(value(1));
                    }
                });
            }
        });
        assert_eq!(computed.load(Ordering::Relaxed), 1);
        let s = cache.stats();
        assert_eq!((s.misses, s.hits, s.entries), (1, 5, 1));
    }

    #[test]
    fn an_abandoned_computation_hands_over_and_waiters_can_be_cancelled() {
        let cache = StateCache::new(StateCacheConfig {
            budget_bytes: 1 << 20,
            min_tokens: 1,
        });
        let first = miss(&cache, &key(3));
        // a waiter whose client left stops waiting
        assert_eq!(cache.lookup(&key(3), 0, &|| true).err(), Some(Cancelled));
        std::thread::scope(|s| {
            let waiter =
                s.spawn(|| matches!(cache.lookup(&key(3), 0, &|| false), Ok(Lookup::Miss(_))));
            std::thread::sleep(Duration::from_millis(50));
            drop(first);
            assert!(
                waiter.join().unwrap(),
                "the waiter takes over the computation"
            );
        });
        assert_eq!(cache.stats().entries, 0);
    }

    #[test]
    fn admission_follows_the_settings() {
        let cache = StateCache::new(StateCacheConfig {
            budget_bytes: 1000,
            min_tokens: 5,
        });
        assert!(cache.admits(5, 1000));
        assert!(!cache.admits(4, 10));
        assert!(!cache.admits(50, 1001));
        assert!(!StateCache::new(StateCacheConfig::off()).admits(1 << 20, 0));
    }
}
