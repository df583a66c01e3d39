//! Reading a request body under three bounds: its byte limit (a declared `Content-Length` over
//! it is refused before any byte is read, a chunked body as soon as it crosses it), the
//! server-wide body budget (the bytes are reserved before they are read), and a pace (the
//! body's first bytes within `timeout`, then at least `min_rate` bytes a second), so that a
//! client trickling its body holds its place for seconds, not for the request deadline.

use crate::body_budget::{BodyBudget, BodyReservation};
use axum::body::{Body, Bytes};
use axum::http::{header::CONTENT_LENGTH, HeaderMap};
use clef_api::ApiError;
use http_body_util::BodyExt;
use std::time::Duration;
use tokio::time::Instant;

/// What a body must respect.
#[derive(Clone, Copy, Debug)]
pub struct BodyRules {
    pub max_bytes: usize,
    pub timeout: Duration,
    /// Bytes per second; 0 means `timeout` bounds the whole body.
    pub min_rate: u64,
}

impl BodyRules {
    /// How long a body may have taken once `received` bytes have arrived: the timeout, plus
    /// one second per `min_rate` bytes (Apache's mod_reqtimeout rule).
    fn allowance(&self, received: usize) -> Duration {
        if self.min_rate == 0 {
            return self.timeout;
        }
        self.timeout + Duration::from_secs_f64(received as f64 / self.min_rate as f64)
    }
}

/// A body read whole, with the budget's bytes it holds until the request is parsed.
pub struct ReadBody {
    pub bytes: Bytes,
    pub reservation: BodyReservation,
}

/// The start of a body's buffer: small bodies never allocate their whole declared length up
/// front, so a client that declares 13 MiB and sends nothing costs no memory.
const FIRST_CAPACITY: usize = 64 * 1024;

/// The body's declared length, refused (413) when over the limit: checked from the head alone,
/// before the request takes a place in the queue.
pub fn declared_length(headers: &HeaderMap, limit: usize) -> Result<Option<usize>, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(n) if n > limit as u64 => Err(ApiError::too_large(format!(
            "request body is {n} bytes, at most {limit}"
        ))),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

pub async fn read_body(
    headers: &HeaderMap,
    body: Body,
    rules: &BodyRules,
    budget: &BodyBudget,
) -> Result<ReadBody, ApiError> {
    let limit = rules.max_bytes;
    let declared = declared_length(headers, limit)?;
    let mut reservation = budget
        .reserve(declared.unwrap_or(0))
        .ok_or_else(|| budget_full(budget))?;
    let mut buf: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0).min(FIRST_CAPACITY));
    let mut body = body;
    let started = Instant::now();
    loop {
        let due = started + rules.allowance(buf.len());
        let frame = match tokio::time::timeout_at(due, body.frame()).await {
            Ok(Some(frame)) => frame.map_err(read_error)?,
            Ok(None) => break,
            Err(_) => return Err(too_slow(rules, buf.len(), declared, started.elapsed())),
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let seen = buf.len() + data.len();
        if seen > limit {
            return Err(ApiError::too_large(format!(
                "request body is at least {seen} bytes, at most {limit}"
            )));
        }
        if !reservation.grow_to(seen) {
            return Err(budget_full(budget));
        }
        if seen > buf.capacity() {
            // Straight to the declared length once the client shows it is sending, instead
            // of doubling past it.
            let want = declared.filter(|&n| n >= seen).unwrap_or(seen);
            buf.reserve_exact(want.max(buf.capacity() * 2).min(limit) - buf.len());
        }
        buf.extend_from_slice(&data);
    }
    Ok(ReadBody {
        bytes: Bytes::from(buf),
        reservation,
    })
}

/// 429: the bytes of bodies being read are at the server's budget; retrying later fits.
fn budget_full(budget: &BodyBudget) -> ApiError {
    ApiError::new(
        429,
        3040,
        format!(
            "the server is reading too many request bodies at once ({} of {} bytes reserved); retry later",
            budget.reserved(),
            budget.total()
        ),
    )
}

/// 408: the body did not keep to the pace.
fn too_slow(
    rules: &BodyRules,
    received: usize,
    declared: Option<usize>,
    took: Duration,
) -> ApiError {
    let of = declared.map_or(String::new(), |n| format!(" of {n}"));
    let pace = if rules.min_rate == 0 {
        format!("{} s for the whole body", rules.timeout.as_secs_f64())
    } else {
        format!(
            "{} s plus 1 s per {} bytes",
            rules.timeout.as_secs_f64(),
            rules.min_rate
        )
    };
    ApiError::new(
        408,
        3007,
        format!(
            "the request body arrived too slowly: {received}{of} bytes in {:.1} s (allowed: {pace})",
            took.as_secs_f64()
        ),
    )
}

/// A body that stops before its end because the client closed the connection is 499 (nginx's
/// "client closed request", as the metrics count a client that leaves at any other point);
/// any other read failure is the client's malformed body, 400/6003.
fn read_error(e: axum::Error) -> ApiError {
    if client_left(&e) {
        ApiError::new(
            CLIENT_CLOSED,
            5012,
            "the client closed the connection before sending the whole body",
        )
    } else {
        ApiError::bad_json(format!("the request body could not be read: {e}"))
    }
}

/// Whether a body read failed because the connection ended: hyper's incomplete message, or
/// an end of file or reset under its body error (`IncompleteBody`).
fn client_left(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
            ) {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

/// The status of a request whose client left before its response.
pub const CLIENT_CLOSED: u16 = 499;

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn rules(max_bytes: usize) -> BodyRules {
        BodyRules {
            max_bytes,
            timeout: Duration::from_secs(10),
            min_rate: 1024,
        }
    }

    #[tokio::test]
    async fn limits() {
        let budget = BodyBudget::new(1 << 20);
        let h = HeaderMap::new();
        let ok = read_body(&h, Body::from("12345"), &rules(5), &budget)
            .await
            .unwrap();
        assert_eq!(&ok.bytes[..], b"12345");
        assert_eq!(budget.reserved(), 5, "held until the request is parsed");
        drop(ok);
        assert_eq!(budget.reserved(), 0);
        let e = read_body(&h, Body::from("123456"), &rules(5), &budget)
            .await
            .err()
            .unwrap();
        assert_eq!((e.status, e.code), (413, 5021));
        let mut declared = HeaderMap::new();
        declared.insert(CONTENT_LENGTH, HeaderValue::from_static("100"));
        let e = read_body(&declared, Body::from("1"), &rules(5), &budget)
            .await
            .err()
            .unwrap();
        assert_eq!((e.status, e.code), (413, 5021));
        assert_eq!(e.message, "request body is 100 bytes, at most 5");
        assert_eq!(budget.reserved(), 0);
    }

    #[tokio::test]
    async fn the_budget_is_reserved_before_reading() {
        let budget = BodyBudget::new(150);
        let held = budget.reserve(100).unwrap();
        let mut declared = HeaderMap::new();
        declared.insert(CONTENT_LENGTH, HeaderValue::from_static("60"));
        let e = read_body(&declared, Body::from(vec![b'x'; 60]), &rules(1000), &budget)
            .await
            .err()
            .unwrap();
        assert_eq!((e.status, e.code), (429, 3040));
        // A chunked body (no declared length) is refused as its bytes cross the budget.
        let e = read_body(
            &HeaderMap::new(),
            Body::from(vec![b'x'; 60]),
            &rules(1000),
            &budget,
        )
        .await
        .err()
        .unwrap();
        assert_eq!((e.status, e.code), (429, 3040));
        drop(held);
        let ok = read_body(&declared, Body::from(vec![b'x'; 60]), &rules(1000), &budget)
            .await
            .unwrap();
        assert_eq!(ok.bytes.len(), 60);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_must_keep_its_pace() {
        let budget = BodyBudget::new(1 << 20);
        // 100 bytes at once, then one byte every 2 s: the allowance is 10 s plus 1 s per 1024
        // bytes received, so the body is cut off at about 10.1 s, after 5 more bytes.
        let e = read_body(&HeaderMap::new(), trickle(100, 2), &rules(1 << 20), &budget)
            .await
            .err()
            .unwrap();
        assert_eq!((e.status, e.code), (408, 3007));
        assert!(e.message.contains("arrived too slowly: 105 bytes"), "{e}");
        // With no rate, the timeout bounds the whole body: the same trickle is cut at 10 s.
        let whole = BodyRules {
            min_rate: 0,
            ..rules(1 << 20)
        };
        let e = read_body(&HeaderMap::new(), trickle(100, 2), &whole, &budget)
            .await
            .err()
            .unwrap();
        assert_eq!((e.status, e.code), (408, 3007));
        assert!(e.message.contains("10 s for the whole body"), "{e}");
        assert_eq!(budget.reserved(), 0);
        // A body at the pace is read whole: 4 KiB a second against 1 KiB a second.
        let ok = read_body(
            &HeaderMap::new(),
            steady(20, 4096),
            &rules(1 << 20),
            &budget,
        )
        .await
        .unwrap();
        assert_eq!(ok.bytes.len(), 20 * 4096);
    }

    /// `first` bytes at once, then one byte every `every` seconds, until the reader stops.
    fn trickle(first: usize, every: u64) -> Body {
        let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(1);
        tokio::spawn(async move {
            let mut n = first;
            while tx.send_data(Bytes::from(vec![b'x'; n])).await.is_ok() {
                tokio::time::sleep(Duration::from_secs(every)).await;
                n = 1;
            }
        });
        Body::new(body)
    }

    /// `chunks` chunks of `size` bytes, one a second, then the end.
    fn steady(chunks: usize, size: usize) -> Body {
        let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(1);
        tokio::spawn(async move {
            for _ in 0..chunks {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if tx.send_data(Bytes::from(vec![b'x'; size])).await.is_err() {
                    return;
                }
            }
        });
        Body::new(body)
    }
}
