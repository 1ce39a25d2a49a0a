//! `quorlock completions SHELL` prints a script that completes the subcommands and their options,
//! and `quorlock man [COMMAND]` a roff man page; neither needs masters.

use super::{bare, code, output, stderr};

async fn printed(args: &[&str]) -> String {
    let out = output({
        let mut cmd = bare();
        cmd.args(args);
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test]
async fn completion_scripts_for_bash_zsh_and_fish() {
    let bash = printed(&["completions", "bash"]).await;
    assert!(
        bash.contains("complete -F") && bash.contains("quorlock"),
        "{bash}"
    );
    let zsh = printed(&["completions", "zsh"]).await;
    assert!(zsh.starts_with("#compdef quorlock"), "{zsh}");
    let fish = printed(&["completions", "fish"]).await;
    assert!(fish.contains("complete -c quorlock"), "{fish}");
    for script in [&bash, &zsh, &fish] {
        for word in [
            "run",
            "acquire",
            "release",
            "status",
            "nonblock",
            "conflict-exit-code",
            "tls-ca",
        ] {
            assert!(script.contains(word), "{word} missing from\n{script}");
        }
    }
    let out = output({
        let mut cmd = bare();
        cmd.args(["completions", "tcsh"]);
        cmd
    })
    .await;
    assert_eq!(
        code(&out),
        64,
        "an unknown shell is a usage error: {}",
        stderr(&out)
    );
}

#[tokio::test]
async fn a_man_page_in_roff() {
    let page = printed(&["man"]).await;
    assert!(page.contains(".TH quorlock"), "{page}");
    for word in ["run", "acquire", "release", "status", "completions"] {
        assert!(page.contains(word), "{word} missing from the man page");
    }
    // The pages its SUBCOMMANDS section refers to.
    let run = printed(&["man", "run"]).await;
    assert!(run.contains(".TH quorlock-run"), "{run}");
    assert!(run.contains("nonblock") && run.contains("conflict"), "{run}");
}
