//! Reading a request body under the byte limit. A declared `Content-Length` over the limit is
//! refused before any byte is read; a chunked body is refused as soon as it crosses it.

use axum::body::{Body, Bytes};
use axum::http::{header::CONTENT_LENGTH, HeaderMap};
use clef_api::ApiError;
use http_body_util::BodyExt;

pub async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(n) = declared {
        if n > limit as u64 {
            return Err(ApiError::too_large(format!(
                "request body is {n} bytes, at most {limit}"
            )));
        }
    }
    let capacity = declared.map_or(0, |n| n as usize);
    let mut buf: Vec<u8> = Vec::with_capacity(capacity);
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(read_error)?;
        if let Ok(data) = frame.into_data() {
            let seen = buf.len() + data.len();
            if seen > limit {
                return Err(ApiError::too_large(format!(
                    "request body is at least {seen} bytes, at most {limit}"
                )));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buf))
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

    #[tokio::test]
    async fn limits() {
        let h = HeaderMap::new();
        let ok = read_body(&h, Body::from("12345"), 5).await.unwrap();
        assert_eq!(&ok[..], b"12345");
        let e = read_body(&h, Body::from("123456"), 5).await.unwrap_err();
        assert_eq!((e.status, e.code), (413, 5021));
        let mut declared = HeaderMap::new();
        declared.insert(CONTENT_LENGTH, HeaderValue::from_static("100"));
        let e = read_body(&declared, Body::from("1"), 5).await.unwrap_err();
        assert_eq!((e.status, e.code), (413, 5021));
        assert_eq!(e.message, "request body is 100 bytes, at most 5");
    }
}
