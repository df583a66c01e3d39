//! The memory of request bodies being read, bounded for all connections together.
//!
//! Each connection may declare a body up to the byte limit (13 MiB by default); without a
//! shared bound, a thousand connections that declare one and then send it slowly would hold
//! a thousand buffers. A body reserves its declared length here before the first byte is read
//! (a chunked body reserves as its chunks arrive) and gives the bytes back when the request
//! is parsed or dropped; a body that does not fit is refused with 429 instead of waiting, so
//! no connection holds memory it has not been granted.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
}

impl BodyBudget {
    pub fn new(total: usize) -> BodyBudget {
        BodyBudget {
            // tokio caps a semaphore's permits far above any memory size (usize::MAX >> 3).
            bytes: Arc::new(Semaphore::new(total.min(Semaphore::MAX_PERMITS))),
            total,
        }
    }

    /// `n` bytes now, or `None` when fewer are free.
    pub fn reserve(&self, n: usize) -> Option<BodyReservation> {
        let permit = acquire(&self.bytes, n)?;
        Some(BodyReservation {
            budget: self.bytes.clone(),
            permit,
        })
    }

    /// Bytes reserved by bodies now.
    pub fn reserved(&self) -> usize {
        self.total
            .min(Semaphore::MAX_PERMITS)
            .saturating_sub(self.bytes.available_permits())
    }

    pub fn total(&self) -> usize {
        self.total
    }
}

fn acquire(bytes: &Arc<Semaphore>, n: usize) -> Option<OwnedSemaphorePermit> {
    let n = u32::try_from(n).ok()?;
    bytes.clone().try_acquire_many_owned(n).ok()
}

/// Bytes granted to one body; given back when dropped.
pub struct BodyReservation {
    budget: Arc<Semaphore>,
    permit: OwnedSemaphorePermit,
}

impl BodyReservation {
    pub fn bytes(&self) -> usize {
        self.permit.num_permits()
    }

    /// Grow the grant to at least `n` bytes; false (the grant unchanged) when the budget has
    /// not that much free.
    pub fn grow_to(&mut self, n: usize) -> bool {
        let have = self.bytes();
        if n <= have {
            return true;
        }
        match acquire(&self.budget, n - have) {
            Some(more) => {
                self.permit.merge(more);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_bounded_and_given_back() {
        let b = BodyBudget::new(100);
        let first = b.reserve(60).unwrap();
        assert_eq!(b.reserved(), 60);
        assert!(b.reserve(41).is_none());
        let mut second = b.reserve(40).unwrap();
        assert!(!second.grow_to(41));
        assert_eq!(second.bytes(), 40);
        drop(first);
        assert!(second.grow_to(90));
        assert_eq!((second.bytes(), b.reserved()), (90, 90));
        assert!(second.grow_to(10), "a smaller size is already granted");
        drop(second);
        assert_eq!(b.reserved(), 0);
        assert!(b.reserve(0).is_some());
        assert!(b.reserve(u32::MAX as usize + 1).is_none());
        assert_eq!(b.total(), 100);
    }
}
