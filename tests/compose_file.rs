//! `docker-compose.yml` must describe five independent, fsync-always masters on ports 7001-7005:
//! the safety argument depends on it, so a test reads the file rather than trusting it.

use yaml_rust2::{Yaml, YamlLoader};

fn compose() -> Yaml {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docker-compose.yml");
    let text = std::fs::read_to_string(path).expect("read docker-compose.yml");
    let mut docs = YamlLoader::load_from_str(&text).expect("docker-compose.yml is valid YAML");
    assert_eq!(docs.len(), 1);
    docs.remove(0)
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .map(|v| v.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn five_independent_fsync_always_masters_on_7001_to_7005() {
    let doc = compose();
    let services = doc["services"].as_hash().expect("services");
    assert_eq!(services.len(), 5, "exactly five masters");
    let mut ports = Vec::new();
    for (name, service) in services {
        let name = name.as_str().expect("service name");
        let command = strings(&service["command"]);
        let joined = command.join(" ");
        assert!(joined.contains("--appendonly yes"), "{name}: {joined}");
        assert!(joined.contains("--appendfsync always"), "{name}: {joined}");
        assert!(
            !joined.contains("replicaof") && !joined.contains("slaveof"),
            "{name} must not be a replica"
        );
        for port in strings(&service["ports"]) {
            let (host, container) = port.split_once(':').expect("host:container port");
            assert_eq!(container, "6379", "{name}");
            ports.push(host.parse::<u16>().expect("host port"));
        }
        // Each master keeps its own data: no volume shared between two services.
        let volumes = strings(&service["volumes"]);
        assert_eq!(volumes.len(), 1, "{name}");
    }
    ports.sort_unstable();
    assert_eq!(ports, vec![7001, 7002, 7003, 7004, 7005]);
    let volumes: std::collections::HashSet<String> =
        services.values().flat_map(|s| strings(&s["volumes"])).collect();
    assert_eq!(volumes.len(), 5, "five distinct data volumes");
}
