//! Settings of the HTTP layer (the engine's own settings live in `clef_engine::EngineConfig`).

use clef_api::AnswerOptions;
use std::net::SocketAddr;
use std::time::Duration;

/// 13 MiB, api.md §2.2. Four images are capped at 8 MiB decoded in total, about 10.7 MiB of
/// base64, which leaves room for the state and the schema.
pub const DEFAULT_MAX_BODY_BYTES: usize = 13 * 1024 * 1024;

/// The length Clef was trained at; longer prompts get `x-clef-warning` (api.md §2.2).
pub const TRAINING_LENGTH: usize = 16_384;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where to listen; loopback by default. Port 0 picks a free port.
    pub addr: SocketAddr,
    /// Largest request body in bytes (413/5021 above it, checked before the body is read
    /// when the client declares its length).
    pub max_body_bytes: usize,
    /// Requests computed at the same time. Each one already uses every core through the
    /// engine's pool, so 1 is the default.
    pub concurrency: usize,
    /// Admitted requests that may wait for a computing slot; beyond that, 429/3040.
    pub queue_depth: usize,
    /// Time from the arrival of a request to its answer, queueing included (408/3007).
    pub deadline: Duration,
    /// Bearer token; `None` disables authentication.
    pub api_key: Option<String>,
    /// Cut the state to fit instead of refusing with 413, for every request (a request can
    /// also ask with `x-clef-truncate: state`).
    pub truncate_state: bool,
    /// Rounding and confidence formula of the answers.
    pub answer: AnswerOptions,
    /// `Retry-After` seconds on 429 and 503.
    pub retry_after_s: u64,
    /// Prompts longer than this get `x-clef-warning: context-beyond-training-length`.
    pub training_length: usize,
    /// Time a connection may take to send a request head, and the longest an idle
    /// keep-alive connection is kept; a slow or silent client cannot hold a connection.
    pub header_timeout: Duration,
    /// Connections open at once. At the limit a new client takes the place of the connection
    /// that has waited longest for a request head (silent, slow or idle keep-alive ones);
    /// when every connection is in a request, new clients wait in the listen backlog.
    pub max_connections: usize,
    /// Time a request body may take before its first byte, and the base of its allowance.
    pub body_timeout: Duration,
    /// Every this many bytes received extend the body's allowance by one second, so a body
    /// must keep arriving at about this rate (0: `body_timeout` bounds the whole body).
    pub min_body_rate: u64,
    /// Bytes of request bodies held in memory at once, by all connections together; a body
    /// that does not fit now is refused with 429 before it is read.
    pub body_budget_bytes: usize,
}

/// 256 MiB: the default queue (1 running + 16 waiting) at the default body limit needs 221
/// MiB, so the budget binds only when the queue is made deeper.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 256 * 1024 * 1024;

/// 64 KiB/s (about half a megabit): a 13 MiB body on a slow uplink still arrives, a body sent
/// a byte at a time is cut off after `body_timeout`.
pub const DEFAULT_MIN_BODY_RATE: u64 = 64 * 1024;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            concurrency: 1,
            queue_depth: 16,
            deadline: Duration::from_secs(600),
            api_key: None,
            truncate_state: false,
            answer: AnswerOptions::default(),
            retry_after_s: 1,
            training_length: TRAINING_LENGTH,
            header_timeout: Duration::from_secs(30),
            max_connections: 1024,
            body_timeout: Duration::from_secs(10),
            min_body_rate: DEFAULT_MIN_BODY_RATE,
            body_budget_bytes: DEFAULT_BODY_BUDGET_BYTES,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("concurrency must be at least 1")]
    Concurrency,
    #[error("the request body limit must be at least 1 byte")]
    BodyLimit,
    #[error("the deadline must be longer than zero")]
    Deadline,
    #[error("the API key must not be empty or contain whitespace or control characters")]
    ApiKey,
    #[error("Retry-After must be at least 1 second")]
    RetryAfter,
    #[error("the header timeout must be longer than zero")]
    HeaderTimeout,
    #[error("at least one connection must be allowed")]
    Connections,
    #[error("the body timeout must be longer than zero")]
    BodyTimeout,
    #[error("the body budget must hold at least one body of the largest size ({max_body} bytes), and at most 4 GiB may be one body")]
    BodyBudget { max_body: usize },
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.concurrency == 0 {
            return Err(ConfigError::Concurrency);
        }
        if self.max_body_bytes == 0 {
            return Err(ConfigError::BodyLimit);
        }
        if self.deadline.is_zero() {
            return Err(ConfigError::Deadline);
        }
        if let Some(key) = &self.api_key {
            // A token with spaces could never be sent in one `Bearer` header.
            if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(ConfigError::ApiKey);
            }
        }
        if self.retry_after_s == 0 {
            return Err(ConfigError::RetryAfter);
        }
        if self.header_timeout.is_zero() {
            return Err(ConfigError::HeaderTimeout);
        }
        if self.max_connections == 0 {
            return Err(ConfigError::Connections);
        }
        if self.body_timeout.is_zero() {
            return Err(ConfigError::BodyTimeout);
        }
        // One body's reservation is taken in one piece (a u32 count of permits).
        if self.body_budget_bytes < self.max_body_bytes || self.max_body_bytes > u32::MAX as usize {
            return Err(ConfigError::BodyBudget {
                max_body: self.max_body_bytes,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_loopback() {
        let c = ServerConfig::default();
        assert!(c.validate().is_ok());
        assert!(c.addr.ip().is_loopback());
        assert_eq!(c.max_body_bytes, 13 << 20);
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad = |f: fn(&mut ServerConfig)| {
            let mut c = ServerConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.concurrency = 0), ConfigError::Concurrency);
        assert_eq!(bad(|c| c.max_body_bytes = 0), ConfigError::BodyLimit);
        assert_eq!(bad(|c| c.deadline = Duration::ZERO), ConfigError::Deadline);
        assert_eq!(
            bad(|c| c.api_key = Some("two words".into())),
            ConfigError::ApiKey
        );
        assert_eq!(
            bad(|c| c.api_key = Some(String::new())),
            ConfigError::ApiKey
        );
        assert_eq!(bad(|c| c.retry_after_s = 0), ConfigError::RetryAfter);
        assert_eq!(
            bad(|c| c.header_timeout = Duration::ZERO),
            ConfigError::HeaderTimeout
        );
        assert_eq!(bad(|c| c.max_connections = 0), ConfigError::Connections);
        assert_eq!(
            bad(|c| c.body_timeout = Duration::ZERO),
            ConfigError::BodyTimeout
        );
        assert_eq!(
            bad(|c| c.body_budget_bytes = c.max_body_bytes - 1),
            ConfigError::BodyBudget { max_body: 13 << 20 }
        );
    }
}
