//! `keyslice completions` and `keyslice manpages`: shell completions and man pages, generated
//! from the same argument definitions as `--help`, so they never fall behind the binary. The
//! package installs both (see `packaging/build_deb.sh`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory as _};
use clap_complete::Shell;

use super::{Cli, CliError, print_summary};

/// Arguments of `keyslice completions`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    keyslice completions bash > ~/.local/share/bash-completion/completions/keyslice\n  \
    keyslice completions zsh > ~/.zfunc/_keyslice\n  \
    keyslice completions fish > ~/.config/fish/completions/keyslice.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of `keyslice manpages`.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  \
    keyslice manpages --out ~/.local/share/man/man1 && man keyslice-pacs-publish")]
pub struct ManpagesArgs {
    /// The folder to write the pages into (made if missing): `keyslice.1` and one page per
    /// subcommand (`keyslice-pacs-publish.1`, …).
    #[arg(long)]
    pub out: PathBuf,
    /// Print the pages written as one JSON line.
    #[arg(long)]
    pub json: bool,
}

/// The name the binary is called by.
const BIN: &str = "keyslice";

/// Prints the completion script for one shell on standard output.
pub fn completions(args: &CompletionsArgs) -> Result<(), CliError> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, BIN, &mut script);
    std::io::stdout().lock().write_all(&script)?;
    Ok(())
}

/// Writes `keyslice.1` and a page per subcommand into `--out`.
pub fn manpages(args: &ManpagesArgs) -> Result<(), CliError> {
    std::fs::create_dir_all(&args.out).map_err(|source| CliError::Input {
        path: args.out.clone(),
        source,
    })?;
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let mut written = Vec::new();
    write_pages(&command, &args.out, &mut written).map_err(|source| CliError::Input {
        path: args.out.clone(),
        source,
    })?;
    let summary = serde_json::json!({
        "out": args.out,
        "pages": written.iter().map(|path| path.display().to_string()).collect::<Vec<_>>(),
    });
    print_summary(args.json, &summary, || {
        format!(
            "{} man pages written to {}",
            written.len(),
            args.out.display()
        )
    })
}

/// Writes the page of `command` and of each of its visible subcommands, depth first.
fn write_pages(
    command: &clap::Command,
    out: &Path,
    written: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let page = clap_mangen::Man::new(command.clone()).manual("Keyslice manual");
    let mut text = Vec::new();
    page.render(&mut text)?;
    let path = out.join(page.get_filename());
    crate::io::atomic::write_atomically(&path, &text)?;
    written.push(path);
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        write_pages(sub, out, written)?;
    }
    Ok(())
}
