//! `--json`: one JSON object per invocation, on one line of stdout, for `run`, `acquire`,
//! `release` and `status`, in the documented schema 1 (README, "The `quorlock` command").
//!
//! Every object has `schema` (1), `command`, `key` (KEY as given), `ok` (whether `exit_code` is
//! 0), `exit_code` (quorlock's own) and `error` (the one-line message, or null); each command adds its own fields as it learns
//! them, so a failure still reports what was known (how long it waited, why it was refused). A
//! field is added only where it is documented, and a later schema only adds fields.

use serde_json::{Map, Value};

use crate::exit::Failure;

/// The schema version every object carries.
pub const SCHEMA: u64 = 1;

/// One invocation's JSON object, filled in as the command runs.
#[derive(Debug, Clone)]
pub struct Report {
    fields: Map<String, Value>,
}

impl Report {
    /// An object for `command` on `key`.
    pub fn new(command: &str, key: &str) -> Self {
        let mut fields = Map::new();
        fields.insert("schema".into(), SCHEMA.into());
        fields.insert("command".into(), command.into());
        fields.insert("key".into(), key.into());
        Self { fields }
    }

    /// Sets `name` to `value`.
    pub fn set(&mut self, name: &str, value: impl Into<Value>) {
        self.fields.insert(name.into(), value.into());
    }

    /// The object for the command's `outcome`.
    pub fn finish(mut self, outcome: &Result<u8, Failure>) -> Value {
        let (code, error) = match outcome {
            Ok(code) => (*code, Value::Null),
            Err(failure) => (failure.code, failure.to_string().into()),
        };
        let ok = code == 0;
        if let Err(Failure {
            refusal: Some(refusal),
            ..
        }) = outcome
        {
            self.fields.insert("refused".into(), refusal.name().into());
        }
        self.fields.insert("ok".into(), ok.into());
        self.fields.insert("exit_code".into(), code.into());
        self.fields.insert("error".into(), error);
        Value::Object(self.fields)
    }
}

/// Milliseconds, as JSON numbers carry them.
pub fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::{Refusal, NOT_ACQUIRED};

    #[test]
    fn every_object_carries_the_envelope() {
        let mut report = Report::new("acquire", "k");
        report.set("token", "abc");
        let v = report.finish(&Ok(0));
        assert_eq!(v["schema"], 1);
        assert_eq!(v["command"], "acquire");
        assert_eq!(v["key"], "k");
        assert_eq!(v["ok"], true);
        assert_eq!(v["exit_code"], 0);
        assert_eq!(v["error"], Value::Null);
        assert_eq!(v["token"], "abc");
        assert!(v.get("refused").is_none());
        assert_eq!(Report::new("status", "k").finish(&Ok(69))["ok"], false);
    }

    #[test]
    fn a_failure_says_why() {
        let failure = Failure {
            refusal: Some(Refusal::Held),
            ..Failure::new(NOT_ACQUIRED, "held by another holder")
        };
        let v = Report::new("run", "k").finish(&Err(failure));
        assert_eq!(v["ok"], false);
        assert_eq!(v["exit_code"], 75);
        assert_eq!(v["error"], "held by another holder");
        assert_eq!(v["refused"], "held");
    }
}
