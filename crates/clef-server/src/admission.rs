//! The bounded queue in front of the engine: at most `concurrency` requests compute while at
//! most `queue_depth` more wait; anything beyond that is refused at once (429/3040) instead of
//! piling up memory and latency.
//!
//! Each stage is an RAII value, so a request that is dropped anywhere (client gone, deadline,
//! panic) gives its place back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct Admission {
    slots: Arc<Semaphore>,
    concurrency: usize,
    capacity: usize,
    /// Admitted and not finished: waiting + running.
    admitted: AtomicUsize,
    waiting: AtomicUsize,
    running: AtomicUsize,
}

impl Admission {
    pub fn new(concurrency: usize, queue_depth: usize) -> Arc<Admission> {
        let concurrency = concurrency.max(1);
        Arc::new(Admission {
            slots: Arc::new(Semaphore::new(concurrency)),
            concurrency,
            capacity: concurrency.saturating_add(queue_depth),
            admitted: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
        })
    }

    /// A place in the queue, or `None` when running + waiting is at capacity.
    pub fn try_admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut n = self.admitted.load(Ordering::Acquire);
        loop {
            if n >= self.capacity {
                return None;
            }
            match self
                .admitted
                .compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        Some(Admitted {
            admission: self.clone(),
            started: false,
        })
    }

    /// Requests admitted and waiting for a computing slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Requests computing now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Running plus waiting at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// A request holding a place in the queue.
pub struct Admitted {
    admission: Arc<Admission>,
    /// Set once the place has turned into a computing slot ([`Running`] then owns it).
    started: bool,
}

impl Admitted {
    /// Wait (first come, first served) for a computing slot.
    pub async fn start(mut self) -> Running {
        let admission = self.admission.clone();
        // The semaphore is never closed, so acquiring cannot fail; were it closed, computing
        // without a permit keeps the counters balanced rather than losing the request.
        let permit = admission.slots.clone().acquire_owned().await.ok();
        self.started = true;
        admission.waiting.fetch_sub(1, Ordering::AcqRel);
        admission.running.fetch_add(1, Ordering::AcqRel);
        Running {
            admission,
            _permit: permit,
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if !self.started {
            self.admission.waiting.fetch_sub(1, Ordering::AcqRel);
            self.admission.admitted.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A request holding a computing slot; dropping it frees the slot for the next in line.
pub struct Running {
    admission: Arc<Admission>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.admission.running.fetch_sub(1, Ordering::AcqRel);
        self.admission.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn capacity_is_concurrency_plus_depth() {
        let a = Admission::new(1, 2);
        let first = a.try_admit().unwrap();
        let second = a.try_admit().unwrap();
        let third = a.try_admit().unwrap();
        assert!(a.try_admit().is_none());
        assert_eq!((a.waiting(), a.running()), (3, 0));
        let running = first.start().await;
        assert_eq!((a.waiting(), a.running()), (2, 1));
        // The second cannot start while the only slot is taken.
        let blocked = tokio::time::timeout(Duration::from_millis(20), second.start()).await;
        assert!(blocked.is_err());
        // Dropping the waiting future gave its place back.
        assert_eq!((a.waiting(), a.running()), (1, 1));
        assert!(a.try_admit().is_some());
        drop(running);
        assert_eq!((a.waiting(), a.running()), (1, 0));
        let r3 = third.start().await;
        assert_eq!((a.waiting(), a.running()), (0, 1));
        drop(r3);
        assert_eq!((a.waiting(), a.running()), (0, 0));
        assert_eq!(a.admitted.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn zero_depth_admits_only_the_running_ones() {
        let a = Admission::new(2, 0);
        let x = a.try_admit().unwrap().start().await;
        let y = a.try_admit().unwrap().start().await;
        assert!(a.try_admit().is_none());
        drop(x);
        let z = a.try_admit().unwrap();
        drop(z);
        drop(y);
        assert_eq!(a.admitted.load(Ordering::Acquire), 0);
        assert_eq!(a.capacity(), 2);
        assert_eq!(a.concurrency(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counters_balance_under_contention() {
        let a = Admission::new(2, 3);
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let a = a.clone();
            tasks.push(tokio::spawn(async move {
                let Some(t) = a.try_admit() else {
                    return false;
                };
                let r = t.start().await;
                assert!(a.running() <= 2);
                tokio::time::sleep(Duration::from_millis(1)).await;
                drop(r);
                true
            }));
        }
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap() as usize;
        }
        assert!(admitted >= 5);
        assert_eq!((a.waiting(), a.running()), (0, 0));
        assert_eq!(a.admitted.load(Ordering::Acquire), 0);
    }
}
