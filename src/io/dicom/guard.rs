//! A quick structural walk over a DICOM file's element headers that refuses any element
//! whose declared length runs past the end of the file, before dicom-object parses it.
//!
//! dicom-parser allocates and zero-fills a value's declared length before reading it, so a
//! single damaged length field (up to 4 GiB) costs seconds and gigabytes before the read
//! fails. This walk costs a few reads per file and turns that into an immediate, named error.
//! It covers the uncompressed transfer syntaxes (implicit/explicit VR, little/big endian);
//! deflated files are left to the parser.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

const UNDEFINED: u32 = 0xFFFF_FFFF;
const ITEM: (u16, u16) = (0xFFFE, 0xE000);
const PIXEL_DATA: (u16, u16) = (0x7FE0, 0x0010);

#[derive(Clone, Copy)]
enum Syntax {
    Explicit { little_endian: bool },
    Implicit,
}

/// `Ok(())` when every element length fits in the file (or the syntax is not walked);
/// otherwise which element claims too much.
pub(crate) fn check_lengths(path: &Path) -> Result<(), String> {
    let Ok(file) = File::open(path) else {
        return Ok(()); // the parser will report the open error itself
    };
    let Ok(file_length) = file.metadata().map(|metadata| metadata.len()) else {
        return Ok(());
    };
    let mut reader = BufReader::with_capacity(16 * 1024, file);
    if reader.seek(SeekFrom::Start(132)).is_err() {
        return Ok(());
    }
    let mut walker = Walker {
        reader,
        file_length,
        position: 132,
        last_header_length: 0,
    };
    walker.walk()
}

struct Walker {
    reader: BufReader<File>,
    file_length: u64,
    /// Byte offset of the reader in the file.
    position: u64,
    /// Bytes the last element header took (to step back over it).
    last_header_length: u64,
}

impl Walker {
    fn walk(&mut self) -> Result<(), String> {
        // File meta group: always explicit VR little endian.
        let meta = Syntax::Explicit {
            little_endian: true,
        };
        let mut transfer_syntax = String::new();
        loop {
            let Some((group, element, length)) = self.peek_group_then(meta)? else {
                return Ok(());
            };
            if group != 0x0002 {
                // First dataset element: its header was consumed; go on in the dataset syntax.
                let syntax = match transfer_syntax.trim_end_matches(['\0', ' ']) {
                    "1.2.840.10008.1.2" => Syntax::Implicit,
                    "1.2.840.10008.1.2.2" => Syntax::Explicit {
                        little_endian: false,
                    },
                    "1.2.840.10008.1.2.1.99" => return Ok(()), // deflated: not walked
                    _ => Syntax::Explicit {
                        little_endian: true,
                    },
                };
                // Re-read that first element in the dataset syntax.
                self.seek_to(self.position - self.last_header_length)?;
                return self.walk_dataset(syntax);
            }
            if element == 0x0010 && length < 256 {
                let mut value = vec![0u8; length as usize];
                self.read(&mut value)?;
                transfer_syntax = String::from_utf8_lossy(&value).to_string();
            } else {
                self.skip(group, element, length)?;
            }
        }
    }

    fn walk_dataset(&mut self, syntax: Syntax) -> Result<(), String> {
        let mut in_fragments = false;
        loop {
            let Some((group, element, length, is_sequence)) = self.header(syntax)? else {
                return Ok(());
            };
            if group == 0xFFFE {
                // Item or delimiter. Fragments of encapsulated pixel data are raw bytes.
                if element == 0xE0DD {
                    in_fragments = false;
                } else if (group, element) == ITEM && length != UNDEFINED && in_fragments {
                    self.skip(group, element, length)?;
                } else if (group, element) == ITEM && length != UNDEFINED {
                    self.check_fits(group, element, length)?; // descend into its elements
                }
                continue;
            }
            if length == UNDEFINED {
                in_fragments = (group, element) == PIXEL_DATA;
                continue; // sequence or encapsulated pixel data: walk inside
            }
            if is_sequence {
                self.check_fits(group, element, length)?; // defined-length sequence: descend
                continue;
            }
            self.skip(group, element, length)?;
        }
    }

    /// Reads one element header; `None` at a clean end of file.
    fn header(&mut self, syntax: Syntax) -> Result<Option<(u16, u16, u32, bool)>, String> {
        let little_endian = match syntax {
            Syntax::Explicit { little_endian } => little_endian,
            Syntax::Implicit => true,
        };
        let mut tag = [0u8; 4];
        if !self.read_or_end(&mut tag)? {
            return Ok(None);
        }
        let group = read_u16([tag[0], tag[1]], little_endian);
        let element = read_u16([tag[2], tag[3]], little_endian);
        if group == 0xFFFE {
            let mut length = [0u8; 4];
            self.read(&mut length)?;
            self.last_header_length = 8;
            return Ok(Some((
                group,
                element,
                read_u32(length, little_endian),
                false,
            )));
        }
        match syntax {
            Syntax::Implicit => {
                let mut length = [0u8; 4];
                self.read(&mut length)?;
                self.last_header_length = 8;
                Ok(Some((group, element, read_u32(length, true), false)))
            }
            Syntax::Explicit { little_endian } => {
                let mut vr = [0u8; 2];
                self.read(&mut vr)?;
                let long = matches!(
                    &vr,
                    b"OB"
                        | b"OD"
                        | b"OF"
                        | b"OL"
                        | b"OV"
                        | b"OW"
                        | b"SQ"
                        | b"UC"
                        | b"UN"
                        | b"UR"
                        | b"UT"
                        | b"SV"
                        | b"UV"
                );
                let length = if long {
                    let mut bytes = [0u8; 6];
                    self.read(&mut bytes)?;
                    self.last_header_length = 12;
                    read_u32([bytes[2], bytes[3], bytes[4], bytes[5]], little_endian)
                } else {
                    let mut bytes = [0u8; 2];
                    self.read(&mut bytes)?;
                    self.last_header_length = 8;
                    u32::from(read_u16(bytes, little_endian))
                };
                Ok(Some((group, element, length, &vr == b"SQ")))
            }
        }
    }

    fn peek_group_then(&mut self, syntax: Syntax) -> Result<Option<(u16, u16, u32)>, String> {
        Ok(self
            .header(syntax)?
            .map(|(group, element, length, _)| (group, element, length)))
    }

    fn check_fits(&self, group: u16, element: u16, length: u32) -> Result<(), String> {
        let remaining = self.file_length.saturating_sub(self.position);
        if u64::from(length) > remaining {
            return Err(format!(
                "element ({group:04X},{element:04X}) at byte {} declares {length} bytes but only {remaining} remain: the file is truncated or damaged",
                self.position
            ));
        }
        Ok(())
    }

    fn skip(&mut self, group: u16, element: u16, length: u32) -> Result<(), String> {
        self.check_fits(group, element, length)?;
        self.seek_to(self.position + u64::from(length))
    }

    fn seek_to(&mut self, position: u64) -> Result<(), String> {
        let offset =
            i64::try_from(position).unwrap_or(i64::MAX) - i64::try_from(self.position).unwrap_or(0);
        self.reader
            .seek_relative(offset)
            .map_err(|error| error.to_string())?;
        self.position = position;
        Ok(())
    }

    fn read(&mut self, buffer: &mut [u8]) -> Result<(), String> {
        if self.read_or_end(buffer)? {
            Ok(())
        } else {
            Err(format!(
                "the file ends inside an element header at byte {}",
                self.position
            ))
        }
    }

    /// Fills `buffer`; `false` if the file ended before the first byte.
    fn read_or_end(&mut self, buffer: &mut [u8]) -> Result<bool, String> {
        let mut filled = 0;
        while filled < buffer.len() {
            match self.reader.read(&mut buffer[filled..]) {
                Ok(0) if filled == 0 => return Ok(false),
                Ok(0) => {
                    return Err(format!(
                        "the file ends inside an element header at byte {}",
                        self.position
                    ));
                }
                Ok(count) => filled += count,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error.to_string()),
            }
        }
        self.position += buffer.len() as u64;
        Ok(true)
    }
}

fn read_u16(bytes: [u8; 2], little_endian: bool) -> u16 {
    if little_endian {
        u16::from_le_bytes(bytes)
    } else {
        u16::from_be_bytes(bytes)
    }
}

fn read_u32(bytes: [u8; 4], little_endian: bool) -> u32 {
    if little_endian {
        u32::from_le_bytes(bytes)
    } else {
        u32::from_be_bytes(bytes)
    }
}
