//! Request ids: echoed when the client sent a usable one (`cf-ai-req-id` first, then
//! `x-request-id`), so a caller can correlate its own logs; otherwise a fresh UUID v4.

use axum::http::HeaderMap;

/// Longest client id echoed back; longer ones are replaced, not truncated.
pub const MAX_CLIENT_ID_LEN: usize = 128;

pub fn request_id(headers: &HeaderMap) -> String {
    ["cf-ai-req-id", "x-request-id"]
        .iter()
        .filter_map(|name| headers.get(*name))
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .find(|v| usable(v))
        .map_or_else(new_request_id, str::to_owned)
}

/// Visible ASCII only, so the id is safe in a header and in a log line.
fn usable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_CLIENT_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

/// A random UUID (version 4, RFC 9562 layout), the form `cf-ai-req-id` takes on the hosted
/// service.
pub fn new_request_id() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn fresh_ids_are_uuid_v4() {
        let a = new_request_id();
        let b = new_request_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn client_ids_are_echoed_when_usable() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("abc-123"));
        assert_eq!(request_id(&h), "abc-123");
        h.insert("cf-ai-req-id", HeaderValue::from_static("cf-1"));
        assert_eq!(request_id(&h), "cf-1");
        // Unusable: spaces, too long, empty; falls through to the other header or a new id.
        h.insert("cf-ai-req-id", HeaderValue::from_static("has space"));
        assert_eq!(request_id(&h), "abc-123");
        let long = "x".repeat(MAX_CLIENT_ID_LEN + 1);
        h.insert("x-request-id", HeaderValue::from_str(&long).unwrap());
        assert_eq!(request_id(&h).len(), 36);
        h.insert("x-request-id", HeaderValue::from_static(""));
        assert_eq!(request_id(&h).len(), 36);
        h.insert(
            "x-request-id",
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        assert_eq!(request_id(&h).len(), 36);
    }
}
