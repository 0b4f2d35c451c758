//! Appending to JSON Lines files so that a killed process loses at most the line in flight:
//! each line is written with one `write_all` and synced before the call returns, and a line
//! torn by an earlier kill (no final newline) is closed first, so the next line starts
//! cleanly after it (readers skip the torn one).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Appends `line` (without its newline) to `path`, creating the file; synced to disk.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let mut file = crate::atomic::open_no_follow(
        std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true),
        path,
    )?;
    // Only the last byte tells whether an earlier run tore its line.
    let ends_cleanly = matches!(last_byte(&mut file)?, None | Some(b'\n'));
    let mut bytes = Vec::with_capacity(line.len() + 2);
    if !ends_cleanly {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    file.write_all(&bytes)?;
    file.sync_data()
}

fn last_byte(file: &mut std::fs::File) -> std::io::Result<Option<u8>> {
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut byte = [0u8];
    file.read_exact(&mut byte)?;
    Ok(Some(byte[0]))
}
