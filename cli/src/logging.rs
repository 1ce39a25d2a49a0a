//! The library's tracing events, said in quorlock's voice: a warning prints as one
//! `quorlock: warning: ...` line, like quorlock's own, with the event's fields after its message.
//!
//! By default only warnings show (an even number of masters, a master unreachable at start,
//! replicas attached), and at most one per master: an unreachable master is not also warned about
//! for the checks that then could not reach it. The persistence warnings (target
//! `quorlock::persistence`: no AOF, `appendfsync` below `always`), which the restart grace already
//! answers, are left to `-v`: they would otherwise come with every invocation on such masters.
//! `-v` adds debug lines and every warning, `-vv` trace lines; `RUST_LOG` overrides the levels.

use std::collections::HashSet;
use std::fmt::{self, Write as _};
use std::sync::{Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

use crate::voice;

/// Installs the voice for the process; `verbose` is the count of `-v`.
pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "quorlock=warn,quorlock::persistence=error",
        1 => "quorlock=debug",
        _ => "quorlock=trace,redis=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(Voice {
            every_warning: verbose > 0,
            warned: Mutex::new(HashSet::new()),
        })
        .try_init();
}

/// The layer that prints events through [`voice`].
#[derive(Debug)]
struct Voice {
    /// `-v`: every warning, not only the first about each master.
    every_warning: bool,
    /// The masters warned about so far.
    warned: Mutex<HashSet<u64>>,
}

impl<S: Subscriber> Layer<S> for Voice {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = *event.metadata().level();
        if level == Level::WARN && !self.every_warning {
            if let Some(node) = fields.node {
                let first = self
                    .warned
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(node);
                if !first {
                    return;
                }
            }
        }
        let text = fields.render();
        match level {
            Level::ERROR => voice::error(&text),
            Level::WARN => voice::warning(&text),
            Level::INFO => voice::verbose("info", &text),
            Level::DEBUG => voice::verbose("debug", &text),
            Level::TRACE => voice::verbose("trace", &text),
        }
    }
}

/// An event's fields: its message, the master it is about, and the rest in order.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    node: Option<u64>,
    addr: Option<String>,
    rest: Vec<(&'static str, String)>,
}

impl Fields {
    /// `MESSAGE (master N at ADDR; name: value; ...)`.
    fn render(&self) -> String {
        let mut context = Vec::new();
        match (self.node, &self.addr) {
            (Some(node), Some(addr)) => context.push(format!("master {node} at {addr}")),
            (Some(node), None) => context.push(format!("master {node}")),
            (None, Some(addr)) => context.push(format!("master at {addr}")),
            (None, None) => {}
        }
        context.extend(self.rest.iter().map(|(name, value)| format!("{name}: {value}")));
        let mut out = self.message.clone();
        if !context.is_empty() {
            let _ = write!(out, " ({})", context.join("; "));
        }
        out
    }

    fn record(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            "addr" => self.addr = Some(value),
            name => self.rest.push((name, value)),
        }
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "node" {
            self.node = Some(value);
        } else {
            self.record(field, value.to_string());
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        match u64::try_from(value) {
            Ok(value) if field.name() == "node" => self.node = Some(value),
            _ => self.record(field, value.to_string()),
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record(field, format!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_master_comes_first_and_other_fields_follow_the_message() {
        let fields = Fields {
            message: "master not usable at build".into(),
            node: Some(2),
            addr: Some("127.0.0.1:1".into()),
            rest: vec![("error", "connection refused".into())],
        };
        assert_eq!(
            fields.render(),
            "master not usable at build (master 2 at 127.0.0.1:1; error: connection refused)"
        );
        let plain = Fields {
            message: "an even number of masters".into(),
            rest: vec![("masters", "2".into())],
            ..Fields::default()
        };
        assert_eq!(plain.render(), "an even number of masters (masters: 2)");
    }
}
