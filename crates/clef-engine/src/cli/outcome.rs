//! How a command's outcome reaches the shell: its exit status, or `error: ...` on stderr and 1.

use std::process::ExitCode;

/// The exit status of a command that returned `result`, its error printed first.
pub fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            ExitCode::from(1)
        }
    }
}

/// An error and its causes, each cause added only when the message so far does not already
/// end with it: many errors print their source themselves (`path: os error`), and the user
/// should read it once.
pub fn error_chain(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error that prints its source in its own message, as the model errors do.
    #[derive(Debug)]
    struct Embeds(std::io::Error);

    impl std::fmt::Display for Embeds {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "config.json: {}", self.0)
        }
    }

    impl std::error::Error for Embeds {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = anyhow::Error::new(Embeds(io()));
        assert_eq!(error_chain(&err), "config.json: No such file");
        let err = anyhow::Error::new(io()).context("reading the request");
        assert_eq!(error_chain(&err), "reading the request: No such file");
    }
}
