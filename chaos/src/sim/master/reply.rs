//! What a command gives back: the `redis::Value` a client reads (server errors included, as the
//! client library would parse them off the wire) and the pub/sub messages it published, plus the
//! error texts a real server sends for failures every command shares.

use std::borrow::Cow;

use redis::Value;

/// The reply of one command, and the messages it published.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The reply as a client reads it; a server error is a [`Value::ServerError`].
    pub value: Value,
    /// `(channel, payload)` for each `PUBLISH` the command ran (a script may run several), in
    /// order, for the simulated network to deliver to subscribers.
    pub published: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The error of a command the server refused or failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CmdError {
    /// No such command (for this flavor).
    Unknown,
    /// The argument count does not fit the command's arity.
    Arity,
    /// A script called a command scripts may not call.
    NotFromScript,
    /// Any other error: the full text, code first (`ERR ...`, `WRONGTYPE ...`).
    Msg(Cow<'static, str>),
}

/// The result of one command.
pub(crate) type CmdResult = Result<Value, CmdError>;

/// `WRONGTYPE`, for every command that meets a key of another type.
pub(crate) const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// An argument that should be an integer is not one.
pub(crate) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// An argument that should be a float is not one.
pub(crate) const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Options that do not go together, or an unknown option.
pub(crate) const SYNTAX: &str = "ERR syntax error";
/// An increment past `i64`.
pub(crate) const OVERFLOW: &str = "ERR increment or decrement would overflow";

/// A static error.
pub(crate) fn err(text: &'static str) -> CmdError {
    CmdError::Msg(Cow::Borrowed(text))
}

/// A formatted error.
pub(crate) fn err_owned(text: String) -> CmdError {
    CmdError::Msg(Cow::Owned(text))
}

/// `OK`.
pub(crate) fn ok() -> CmdResult {
    Ok(Value::Okay)
}

/// A bulk string.
pub(crate) fn bulk(bytes: &[u8]) -> Value {
    Value::BulkString(bytes.to_vec())
}

/// A status reply, as the client library parses it (`+OK` is [`Value::Okay`]).
pub(crate) fn status(text: &str) -> Value {
    if text == "OK" {
        Value::Okay
    } else {
        Value::SimpleString(text.to_owned())
    }
}

/// The text of an error reply as a client sees it, for a command called by a client.
pub(crate) fn client_error_text(error: &CmdError, args: &[&[u8]]) -> String {
    let name = args.first().copied().unwrap_or_default();
    match error {
        CmdError::Unknown => {
            // As Redis: the name and the first arguments, quoted, up to about 128 bytes.
            let mut quoted = String::new();
            for arg in args.iter().skip(1) {
                if quoted.len() >= 128 {
                    break;
                }
                let room = 128 - quoted.len();
                let text = String::from_utf8_lossy(&arg[..arg.len().min(room)]).into_owned();
                quoted.push('\'');
                quoted.push_str(&text);
                quoted.push_str("' ");
            }
            let name = String::from_utf8_lossy(&name[..name.len().min(128)]).into_owned();
            format!("ERR unknown command '{name}', with args beginning with: {quoted}")
        }
        CmdError::Arity => format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name).to_lowercase()
        ),
        CmdError::NotFromScript => "ERR This Redis command is not allowed from script".to_owned(),
        CmdError::Msg(text) => text.clone().into_owned(),
    }
}

/// The text of an error reply as a script sees it (`redis.call` / `redis.pcall`).
pub(crate) fn script_error_text(error: &CmdError) -> Cow<'static, str> {
    match error {
        CmdError::Unknown => Cow::Borrowed("ERR Unknown Redis command called from script"),
        CmdError::Arity => Cow::Borrowed("ERR Wrong number of args calling Redis command from script"),
        CmdError::NotFromScript => Cow::Borrowed("ERR This Redis command is not allowed from script"),
        CmdError::Msg(text) => text.clone(),
    }
}

/// A [`Value::ServerError`] carrying `text` (code first), as parsed off the wire. Line breaks
/// become spaces, as the server does, since an error reply is one line.
pub(crate) fn server_error(text: &str) -> Value {
    let mut line = Vec::with_capacity(text.len() + 3);
    line.push(b'-');
    line.extend(
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    line.extend_from_slice(b"\r\n");
    match redis::parse_redis_value(&line) {
        Ok(value @ Value::ServerError(_)) => value,
        // One line starting with `-` always parses as an error; keep the text visible if not.
        _ => Value::SimpleString(format!("-{text}")),
    }
}

/// The reply of a master busy running a script past its `busy-reply-threshold`, to every command
/// but `SCRIPT KILL` and `SHUTDOWN NOSAVE`.
pub fn busy() -> Value {
    server_error(BUSY)
}

/// `BUSY`'s words, as Redis 7.0 sends them.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// The text of a [`Value::ServerError`] (`CODE detail`), as the server sent it.
pub(crate) fn error_text(value: &Value) -> Option<String> {
    match value {
        Value::ServerError(e) => Some(match e.details() {
            Some(detail) => format!("{} {}", e.code(), detail),
            None => e.code().to_owned(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_round_trip() {
        let v = server_error(WRONGTYPE);
        assert_eq!(error_text(&v).as_deref(), Some(WRONGTYPE));
        let v = server_error("NOSCRIPT No matching script. Please use EVAL.");
        match &v {
            Value::ServerError(e) => assert_eq!(e.kind(), Some(redis::ServerErrorKind::NoScript)),
            other => panic!("{other:?}"),
        }
        assert_eq!(error_text(&server_error("a\r\nb")).as_deref(), Some("a  b"));
    }

    #[test]
    fn unknown_command_text_quotes_arguments() {
        let text = client_error_text(&CmdError::Unknown, &[b"NOPE", b"a", b"b"]);
        assert_eq!(
            text,
            "ERR unknown command 'NOPE', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            client_error_text(&CmdError::Arity, &[b"GET"]),
            "ERR wrong number of arguments for 'get' command"
        );
    }
}
