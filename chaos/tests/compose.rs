//! Checks the compose backend's exact `docker compose` calls with a fake `docker` program
//! that records its argv, and that the process cluster works through the same `Backend`.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quorlock_chaos::{Backend, Cluster, Compose, ComposeOptions, DataMode, HarnessError};

/// A temp dir holding a fake `docker` that appends `[arg]...` lines to `calls.log`.
struct FakeDocker {
    dir: PathBuf,
}

impl FakeDocker {
    fn new() -> FakeDocker {
        let dir = std::env::temp_dir().join(format!("quorlock-fake-docker-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("docker");
        std::fs::write(
            &script,
            "#!/bin/sh\n\
             for a in \"$@\"; do printf '[%s]' \"$a\"; done >> \"$FAKE_DOCKER_LOG\"\n\
             echo >> \"$FAKE_DOCKER_LOG\"\n\
             if [ \"$4\" = \"$FAKE_DOCKER_FAIL\" ]; then echo \"no such service: $5\" >&2; exit 3; fi\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeDocker { dir }
    }

    fn log(&self) -> PathBuf {
        self.dir.join("calls.log")
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    /// Options finding the fake `docker` through the command's own PATH.
    fn options(&self, file: &Path, fail: &str) -> ComposeOptions {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut new_path = OsString::from(&self.dir);
        new_path.push(":");
        new_path.push(path);
        let mut opts = ComposeOptions::new(file);
        opts.env = vec![
            ("PATH".into(), new_path),
            ("FAKE_DOCKER_LOG".into(), self.log().into()),
            ("FAKE_DOCKER_FAIL".into(), fail.into()),
        ];
        opts.ready_timeout = None;
        opts
    }
}

impl Drop for FakeDocker {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn faults_become_the_exact_docker_compose_calls() {
    let fake = FakeDocker::new();
    let file = Path::new("/srv/quorlock/docker-compose.yml");
    let mut backend: Box<dyn Backend> = Box::new(Compose::new(fake.options(file, "none")).unwrap());
    assert_eq!(backend.name(), "compose");
    assert_eq!(backend.len(), 5);
    assert_eq!(
        backend.urls(),
        (7001..=7005)
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
    );

    backend.kill(0).await.unwrap();
    backend.pause(1).await.unwrap();
    backend.resume(1).await.unwrap();
    backend.restart(2, DataMode::Keep).await.unwrap();
    backend.restart(4, DataMode::Wipe).await.unwrap();

    let f = "[compose][-f][/srv/quorlock/docker-compose.yml]";
    assert_eq!(
        fake.calls(),
        vec![
            format!("{f}[kill][redis1]"),
            format!("{f}[pause][redis2]"),
            format!("{f}[unpause][redis2]"),
            format!("{f}[kill][redis3]"),
            format!("{f}[start][redis3]"),
            format!("{f}[kill][redis5]"),
            format!("{f}[run][--rm][--no-deps][--entrypoint][find][redis5][/data][-mindepth][1][-delete]"),
            format!("{f}[start][redis5]"),
        ]
    );

    let err = backend.kill(5).await.unwrap_err();
    assert!(
        matches!(err, HarnessError::NoSuchMaster { index: 5, len: 5 }),
        "{err}"
    );
}

#[tokio::test]
async fn a_failing_docker_call_reports_command_status_and_stderr() {
    let fake = FakeDocker::new();
    let compose = Compose::new(fake.options(Path::new("c.yml"), "pause")).unwrap();
    let err = compose.pause(2).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, HarnessError::Command { .. }), "{msg}");
    assert!(msg.contains("compose -f c.yml pause redis3"), "{msg}");
    assert!(msg.contains("no such service: redis3"), "{msg}");
    assert!(msg.contains('3'), "{msg}");
}

#[tokio::test]
async fn a_missing_docker_program_is_an_io_error_naming_it() {
    let mut opts = ComposeOptions::new("c.yml");
    opts.docker = PathBuf::from("/nonexistent/docker");
    let err = Compose::new(opts).unwrap().kill(0).await.unwrap_err();
    assert!(err.to_string().contains("/nonexistent/docker"), "{err}");
}

#[tokio::test]
async fn restart_waits_for_ping_on_the_published_port() {
    // Point the compose backend at a real local master so the readiness probe succeeds.
    let cluster = Cluster::start(1).await.unwrap();
    let fake = FakeDocker::new();
    let mut opts = fake.options(Path::new("c.yml"), "none");
    opts.services = vec!["redis1".into()];
    opts.ports = vec![cluster.port(0)];
    opts.ready_timeout = Some(Duration::from_secs(10));
    Compose::new(opts.clone())
        .unwrap()
        .restart(0, DataMode::Keep)
        .await
        .unwrap();

    // A listener that never speaks RESP holds the port: the wait ends with NotReady.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    opts.ports = vec![mute.local_addr().unwrap().port()];
    opts.ready_timeout = Some(Duration::from_millis(300));
    let err = Compose::new(opts)
        .unwrap()
        .restart(0, DataMode::Keep)
        .await
        .unwrap_err();
    assert!(matches!(err, HarnessError::NotReady { index: 0, .. }), "{err}");
}

#[test]
fn mismatched_services_and_ports_are_rejected() {
    let mut opts = ComposeOptions::new("c.yml");
    opts.ports.pop();
    let err = Compose::new(opts).unwrap_err().to_string();
    assert!(err.contains("redis5"), "{err}");
}

#[tokio::test]
async fn the_process_cluster_is_a_backend_too() {
    let mut cluster = Cluster::start(2).await.unwrap();
    let backend: &mut dyn Backend = &mut cluster;
    assert_eq!(backend.name(), "process");
    assert_eq!(backend.len(), 2);
    backend.kill(0).await.unwrap();
    backend.pause(1).await.unwrap();
    backend.resume(1).await.unwrap();
    backend.restart(0, DataMode::Wipe).await.unwrap();
    let urls = backend.urls();
    assert!(cluster.is_running(0) && cluster.is_running(1));
    assert_eq!(urls, cluster.urls());
}
