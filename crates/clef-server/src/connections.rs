//! Open connections and whether each is inside a request, so that the connection limit cannot
//! be filled by clients that never send one.
//!
//! A connection is *waiting* from its accept (and again after each response) until its next
//! request head has arrived, and *in a request* while the router handles that request. The
//! header timer closes a waiting connection eventually; until then, a new client at the limit
//! takes the place of the connection that has waited longest (a silent socket, a slow head, an
//! idle keep-alive), because a waiting connection has been promised nothing. Connections in a
//! request are never closed for a newcomer: their bodies are bounded by the body pace and the
//! deadline, and when every connection is in one, new clients wait in the listen backlog.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{oneshot, Notify};

pub struct Connections {
    max: usize,
    inner: Mutex<Registry>,
    /// A place opened up or a connection started waiting: the accept loop looks again.
    changed: Notify,
    evicted: AtomicU64,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    open: HashMap<u64, Slot>,
}

struct Slot {
    in_request: bool,
    /// When it last started waiting for a request head.
    waiting_since: Instant,
    /// Fired (or dropped) to close the connection for a newcomer.
    evict: Option<oneshot::Sender<()>>,
}

impl Connections {
    pub fn new(max: usize) -> Arc<Connections> {
        Arc::new(Connections {
            max: max.max(1),
            inner: Mutex::new(Registry::default()),
            changed: Notify::new(),
            evicted: AtomicU64::new(0),
        })
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Completes once a new connection would get a place: a free one, or one that is waiting.
    pub async fn room(&self) {
        loop {
            // `notify_one` keeps a permit when nobody waits, so a change between this check
            // and the await below is not lost.
            let changed = self.changed.notified();
            {
                let reg = self.registry();
                if reg.open.len() < self.max || reg.open.values().any(|s| !s.in_request) {
                    return;
                }
            }
            changed.await;
        }
    }

    /// Register a new connection, closing the longest-waiting one if at the limit; `None` when
    /// every open connection is in a request (wait for [`Connections::room`] and try again).
    pub fn open(self: &Arc<Self>) -> Option<Connection> {
        let mut reg = self.registry();
        if reg.open.len() >= self.max {
            let oldest = reg
                .open
                .iter()
                .filter(|(_, s)| !s.in_request)
                .min_by_key(|(_, s)| s.waiting_since)
                .map(|(&id, _)| id)?;
            if let Some(mut slot) = reg.open.remove(&oldest) {
                if let Some(evict) = slot.evict.take() {
                    let _ = evict.send(());
                }
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        let id = reg.next_id;
        reg.next_id += 1;
        let (evict, evicted) = oneshot::channel();
        reg.open.insert(
            id,
            Slot {
                in_request: false,
                waiting_since: Instant::now(),
                evict: Some(evict),
            },
        );
        Some(Connection {
            id,
            connections: self.clone(),
            evicted,
        })
    }

    pub fn open_count(&self) -> usize {
        self.registry().open.len()
    }

    /// Connections closed so that a new client could connect.
    pub fn evicted_total(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> usize {
        self.max
    }

    fn set_in_request(&self, id: u64, in_request: bool) {
        let mut reg = self.registry();
        if let Some(slot) = reg.open.get_mut(&id) {
            slot.in_request = in_request;
            if !in_request {
                slot.waiting_since = Instant::now();
            }
        }
        drop(reg);
        if !in_request {
            self.changed.notify_one();
        }
    }

    fn close(&self, id: u64) {
        self.registry().open.remove(&id);
        self.changed.notify_one();
    }
}

/// One registered connection; dropping it frees its place.
pub struct Connection {
    id: u64,
    connections: Arc<Connections>,
    evicted: oneshot::Receiver<()>,
}

impl Connection {
    /// What the connection's service uses to say a request is being handled.
    pub fn activity(&self) -> Activity {
        Activity {
            id: self.id,
            connections: self.connections.clone(),
        }
    }

    /// Completes when the connection is closed for a newcomer.
    pub async fn evicted(&mut self) {
        // A dropped sender means the same: the slot was removed for someone else.
        let _ = (&mut self.evicted).await;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.connections.close(self.id);
    }
}

#[derive(Clone)]
pub struct Activity {
    id: u64,
    connections: Arc<Connections>,
}

impl Activity {
    /// Marks the connection as in a request until the guard is dropped (also when the
    /// request's future is dropped because the client left).
    pub fn in_request(&self) -> InRequest {
        self.connections.set_in_request(self.id, true);
        InRequest(self.clone())
    }
}

pub struct InRequest(Activity);

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0.connections.set_in_request(self.0.id, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_longest_waiting_connection_makes_room() {
        let c = Connections::new(2);
        let mut first = c.open().unwrap();
        let second = c.open().unwrap();
        let busy = second.activity().in_request();
        // At the limit: the newcomer takes the waiting one's place, not the busy one's.
        let mut third = c.open().unwrap();
        tokio::time::timeout(Duration::from_secs(1), first.evicted())
            .await
            .expect("the waiting connection is closed");
        assert_eq!((c.open_count(), c.evicted_total()), (2, 1));
        drop(first); // its task ends; the place is already someone else's
        assert_eq!(c.open_count(), 2);
        // Both in a request: no room until one ends its request.
        let busy3 = third.activity().in_request();
        assert!(c.open().is_none());
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move { c.room().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(busy);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .unwrap()
            .unwrap();
        let _fourth = c.open().unwrap();
        tokio::time::timeout(Duration::from_millis(50), third.evicted())
            .await
            .expect_err("a connection in a request is never closed for a newcomer");
        drop(busy3);
        drop(second);
        drop(third);
        assert_eq!(c.open_count(), 1);
        assert_eq!(c.max(), 2);
    }

    #[tokio::test]
    async fn the_oldest_waiter_goes_first() {
        let c = Connections::new(3);
        let mut a = c.open().unwrap();
        let b = c.open().unwrap();
        let mut d = c.open().unwrap();
        // `a` was in a request and is waiting again: it has waited least now.
        drop(a.activity().in_request());
        let _e = c.open().unwrap();
        tokio::time::timeout(Duration::from_secs(1), b_evicted(&b, &c))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_millis(20), a.evicted())
            .await
            .expect_err("a is newer");
        tokio::time::timeout(Duration::from_millis(20), d.evicted())
            .await
            .expect_err("d is newer");
    }

    async fn b_evicted(b: &Connection, c: &Connections) {
        while c.registry().open.contains_key(&b.id) {
            tokio::task::yield_now().await;
        }
    }
}
