//! Running the `docker` program: one place that spawns it (retrying a program file that is
//! momentarily busy), collects its output and turns a failure into a [`HarnessError`] naming
//! the command line, its status and its stderr. The compose backend, the project lifecycle
//! and the label sweep all go through it; the blocking variant serves `Drop`, where no
//! runtime can be awaited.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::error::HarnessError;

/// How often a spawn is retried when the program file is momentarily busy (ETXTBSY).
const SPAWN_ATTEMPTS: u32 = 20;

/// A docker command line: the program, its arguments and extra environment.
#[derive(Debug, Clone)]
pub(crate) struct DockerCommand<'a> {
    pub(crate) program: &'a Path,
    pub(crate) args: Vec<OsString>,
    pub(crate) env: &'a [(OsString, OsString)],
}

impl<'a> DockerCommand<'a> {
    pub(crate) fn new(program: &'a Path, env: &'a [(OsString, OsString)]) -> DockerCommand<'a> {
        DockerCommand {
            program,
            args: Vec::new(),
            env,
        }
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The command line as shown in errors.
    pub(crate) fn shown(&self) -> String {
        let mut shown = self.program.display().to_string();
        for arg in &self.args {
            shown.push(' ');
            shown.push_str(&arg.to_string_lossy());
        }
        shown
    }

    /// Runs it and returns its stdout; a non-zero exit is [`HarnessError::Command`].
    pub(crate) async fn output(&self) -> Result<String, HarnessError> {
        let mut attempt = 0;
        let child = loop {
            attempt += 1;
            let mut cmd = tokio::process::Command::new(self.program);
            cmd.args(&self.args)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            match cmd.spawn() {
                Ok(child) => break child,
                // Another thread may still hold the just-written program open for writing.
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < SPAWN_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => return Err(HarnessError::io(format!("running `{}`", self.shown()), e)),
            }
        };
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| HarnessError::io(format!("waiting for `{}`", self.shown()), e))?;
        self.check(output)
    }

    /// Runs it and returns its stdout and stderr, whatever its exit status.
    pub(crate) async fn output_split(&self) -> Result<(String, String), HarnessError> {
        let output = tokio::process::Command::new(self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| HarnessError::io(format!("running `{}`", self.shown()), e))?;
        Ok((
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }

    /// Runs it to completion, blocking the thread: for `Drop` and signal paths.
    pub(crate) fn output_blocking(&self) -> Result<String, HarnessError> {
        let output = std::process::Command::new(self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| HarnessError::io(format!("running `{}`", self.shown()), e))?;
        self.check(output)
    }

    fn check(&self, output: Output) -> Result<String, HarnessError> {
        if !output.status.success() {
            return Err(HarnessError::Command {
                command: self.shown(),
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}
