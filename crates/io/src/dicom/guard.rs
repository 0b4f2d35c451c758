//! A quick structural walk over a DICOM file's element headers that refuses any element
//! whose declared length runs past the end of the file, a sequence that holds something
//! other than items, and nesting deeper than the parser's recursion should go, before
//! dicom-object parses it. It reads the file as the parser does: unknown VRs with a 32-bit
//! length, the inside of an undefined-length UN in implicit VR, Pixel Data marked SQ as a
//! sequence.
//!
//! dicom-parser allocates and zero-fills a value's declared length before reading it, so a
//! single damaged length field (up to 4 GiB) costs seconds and gigabytes before the read
//! fails. This walk costs a few reads per file and turns that into an immediate, named error.
//! It covers the uncompressed transfer syntaxes (implicit/explicit VR, little/big endian)
//! and Deflated Explicit VR Little Endian, whose dataset is inflated twice as a stream (once to
//! learn its length, bounded by the memory budget, once to walk it), never into memory.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use dicom_dictionary_std::uids;
use flate2::bufread::DeflateDecoder;

use crate::limits;

const UNDEFINED: u32 = 0xFFFF_FFFF;
const PIXEL_DATA: (u16, u16) = (0x7FE0, 0x0010);
/// Deepest nesting of sequences and items accepted (real files stay under ten).
const MAX_NESTING: usize = 64;

/// Group, element, declared length, and the VR when the syntax writes it.
type ElementHeader = (u16, u16, u32, Option<[u8; 2]>);

/// What the walk is inside of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    Sequence,
    Item,
    Fragments,
}

#[derive(Clone, Copy)]
enum Syntax {
    Explicit { little_endian: bool },
    Implicit,
}

/// Where a file's Pixel Data lies, as the walk found it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Walked {
    /// Defined length of the last Pixel Data element walked (the caller compares it with the
    /// image size).
    pub pixel_data_length: Option<u64>,
    /// Byte offset of the value of a top-level Pixel Data element of defined length in a
    /// file that is not deflated: native samples can be read from there directly.
    pub pixel_data_offset: Option<u64>,
    /// The file's length in bytes.
    pub file_length: u64,
}

/// `Ok` when every element length fits in the file (with where Pixel Data lies); otherwise
/// which element claims too much.
pub(crate) fn check_lengths(path: &Path) -> Result<Walked, String> {
    check_lengths_and_items(path, usize::MAX)
}

/// [`check_lengths`], refusing also a file of more than `max_items` sequence items in all (a
/// structured report whose content tree is a million items long).
pub(crate) fn check_lengths_and_items(path: &Path, max_items: usize) -> Result<Walked, String> {
    match crate::limits::open_regular(path) {
        Ok(file) => check_open_file(&file, max_items),
        // Not a regular file: the parser must not open it either (a FIFO would block it).
        Err(error) if error.kind() == std::io::ErrorKind::InvalidInput => Err(error.to_string()),
        Err(_) => Ok(Walked::default()), // the parser will report the open error itself
    }
}

/// [`check_lengths_and_items`] on a file already open (its position is left anywhere).
pub(crate) fn check_open_file(file: &File, max_items: usize) -> Result<Walked, String> {
    let Ok(file_length) = file.metadata().map(|metadata| metadata.len()) else {
        return Ok(Walked::default());
    };
    let mut reader = BufReader::with_capacity(16 * 1024, file);
    if reader.seek(SeekFrom::Start(132)).is_err() {
        return Ok(Walked {
            file_length,
            ..Walked::default()
        });
    }
    let mut walker = Walker {
        reader,
        file_length,
        position: 132,
        last_header_length: 0,
        pixel_data_length: None,
        pixel_data_offset: None,
        items: 0,
        max_items,
    };
    match walker.walk()? {
        None => Ok(Walked {
            pixel_data_length: walker.pixel_data_length,
            pixel_data_offset: walker.pixel_data_offset,
            file_length,
        }),
        Some(deflated_start) => Ok(Walked {
            pixel_data_length: check_deflated(file, deflated_start, max_items)?,
            pixel_data_offset: None,
            file_length,
        }),
    }
}

/// Walks the inflated dataset of a deflated file that starts at byte `start`.
fn check_deflated(file: &File, start: u64, max_items: usize) -> Result<Option<u64>, String> {
    let open_inflated = || -> Result<DeflateDecoder<BufReader<&File>>, String> {
        let mut file = file;
        file.seek(SeekFrom::Start(start))
            .map_err(|error| error.to_string())?;
        Ok(DeflateDecoder::new(BufReader::with_capacity(
            16 * 1024,
            file,
        )))
    };
    // The dataset is at most the budget for a volume plus room for the header elements.
    let budget = limits::max_volume_bytes().saturating_add(64 << 20);
    let inflated_length = std::io::copy(
        &mut open_inflated()?.take(budget.saturating_add(1)),
        &mut std::io::sink(),
    )
    .map_err(|error| format!("the deflated dataset cannot be inflated: {error}"))?;
    if inflated_length > budget {
        return Err(format!(
            "the deflated dataset inflates to more than {} MB, over the budget for one volume ({})",
            budget >> 20,
            limits::MAX_VOLUME_ENV
        ));
    }
    let mut walker = Walker {
        reader: Inflated(open_inflated()?),
        file_length: inflated_length,
        position: 0,
        last_header_length: 0,
        pixel_data_length: None,
        pixel_data_offset: None,
        items: 0,
        max_items,
    };
    walker.walk_dataset(Syntax::Explicit {
        little_endian: true,
    })?;
    Ok(walker.pixel_data_length)
}

/// A byte source the walk can move forward in.
trait Forward: Read {
    /// Moves `count` bytes forward.
    fn forward(&mut self, count: u64) -> std::io::Result<()>;
}

impl<R: Read + Seek> Forward for BufReader<R> {
    fn forward(&mut self, count: u64) -> std::io::Result<()> {
        self.seek_relative(i64::try_from(count).unwrap_or(i64::MAX))
    }
}

/// An inflated stream: moving forward reads and drops.
struct Inflated<R>(R);

impl<R: Read> Read for Inflated<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buffer)
    }
}

impl<R: Read> Forward for Inflated<R> {
    fn forward(&mut self, count: u64) -> std::io::Result<()> {
        let moved = std::io::copy(&mut (&mut self.0).take(count), &mut std::io::sink())?;
        if moved == count {
            Ok(())
        } else {
            Err(std::io::ErrorKind::UnexpectedEof.into())
        }
    }
}

struct Walker<R> {
    reader: R,
    file_length: u64,
    /// Byte offset of the reader in the file.
    position: u64,
    /// Bytes the last element header took (to step back over it).
    last_header_length: u64,
    /// Defined length of the last Pixel Data element walked.
    pixel_data_length: Option<u64>,
    /// Where the value of a top-level Pixel Data element of defined length starts.
    pixel_data_offset: Option<u64>,
    /// Sequence items met so far.
    items: usize,
    /// The most sequence items accepted.
    max_items: usize,
}

impl<R: Read + Seek> Walker<BufReader<R>> {
    /// Walks the file meta group, then the dataset; `Some(offset)` when the dataset is
    /// deflated and starts at `offset` (the caller walks it inflated).
    fn walk(&mut self) -> Result<Option<u64>, String> {
        // File meta group: always explicit VR little endian.
        let meta = Syntax::Explicit {
            little_endian: true,
        };
        let mut transfer_syntax = String::new();
        loop {
            let Some((group, element, length)) = self.peek_group_then(meta)? else {
                return Ok(None);
            };
            if group != 0x0002 {
                // First dataset element: its header was consumed; go on in the dataset syntax.
                let syntax = match transfer_syntax.trim_end_matches(['\0', ' ']) {
                    uids::IMPLICIT_VR_LITTLE_ENDIAN => Syntax::Implicit,
                    super::EXPLICIT_VR_BIG_ENDIAN => Syntax::Explicit {
                        little_endian: false,
                    },
                    uids::DEFLATED_EXPLICIT_VR_LITTLE_ENDIAN => {
                        return Ok(Some(self.position - self.last_header_length));
                    }
                    _ => Syntax::Explicit {
                        little_endian: true,
                    },
                };
                // Re-read that first element in the dataset syntax.
                let start = self.position - self.last_header_length;
                let offset = i64::try_from(start).unwrap_or(i64::MAX)
                    - i64::try_from(self.position).unwrap_or(0);
                self.reader
                    .seek_relative(offset)
                    .map_err(|error| error.to_string())?;
                self.position = start;
                return self.walk_dataset(syntax).map(|()| None);
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
}

impl<R: Forward> Walker<R> {
    fn walk_dataset(&mut self, syntax: Syntax) -> Result<(), String> {
        // Open sequences, items and encapsulated pixel data, each with where it ends when its
        // length is defined (`None`: at its delimiter). The parser descends recursively, so
        // nesting is bounded; and inside a sequence it reads only items, so anything else
        // there is refused here rather than read as an item of a garbage length.
        // Each with the syntax of what it holds: a UN element of undefined length holds
        // implicit VR little endian, as the standard (and the parser) has it.
        let mut open: Vec<(Container, Option<u64>, Syntax)> = Vec::new();
        loop {
            // Defined-length containers end where their length says.
            let header_start = self.position;
            while open
                .last()
                .is_some_and(|(_, end, _)| end.is_some_and(|end| header_start >= end))
            {
                open.pop();
            }
            let inside = open.last().map(|(kind, _, _)| *kind);
            let current = open.last().map_or(syntax, |(_, _, inner)| *inner);
            let Some((group, element, length, vr)) = self.header(current)? else {
                return Ok(());
            };
            let is_sequence = vr == Some(*b"SQ");
            if group == 0xFFFE {
                match (element, inside) {
                    (0xE0DD, Some(Container::Sequence | Container::Fragments))
                    | (0xE00D, Some(Container::Item)) => {
                        open.pop();
                    }
                    (0xE000, Some(Container::Fragments)) if length != UNDEFINED => {
                        self.skip(group, element, length)?; // a fragment: raw bytes
                    }
                    (0xE000, Some(Container::Sequence)) => {
                        self.items += 1;
                        if self.items > self.max_items {
                            return Err(format!(
                                "more than {} sequence items (at byte {header_start}): far more than such a document holds",
                                self.max_items
                            ));
                        }
                        let end = (length != UNDEFINED).then(|| self.position + u64::from(length));
                        if length != UNDEFINED {
                            self.check_fits(group, element, length)?; // descend into it
                        }
                        open.push((Container::Item, end, current));
                    }
                    _ => {
                        return Err(format!(
                            "item tag (FFFE,{element:04X}) at byte {header_start} where no item belongs: the file is damaged"
                        ));
                    }
                }
                self.check_depth(open.len())?;
                continue;
            }
            if matches!(inside, Some(Container::Sequence | Container::Fragments)) {
                return Err(format!(
                    "element ({group:04X},{element:04X}) at byte {header_start} inside a sequence, where only items belong: the file is damaged"
                ));
            }
            if length == UNDEFINED {
                // Pixel Data whose VR says SQ is read by the parser as a sequence: so here.
                let kind = if (group, element) == PIXEL_DATA && !is_sequence {
                    Container::Fragments
                } else {
                    Container::Sequence
                };
                let inner = if vr == Some(*b"UN") {
                    Syntax::Implicit
                } else {
                    current
                };
                open.push((kind, None, inner));
                self.check_depth(open.len())?;
                continue; // sequence or encapsulated pixel data: walk inside
            }
            if is_sequence {
                self.check_fits(group, element, length)?; // defined-length sequence: descend
                open.push((
                    Container::Sequence,
                    Some(self.position + u64::from(length)),
                    current,
                ));
                self.check_depth(open.len())?;
                continue;
            }
            if (group, element) == PIXEL_DATA {
                self.pixel_data_length = Some(u64::from(length));
                self.pixel_data_offset = open.is_empty().then_some(self.position);
            }
            self.skip(group, element, length)?;
        }
    }

    /// Reads one element header; `None` at a clean end of file.
    /// Reads one element header: group, element, length and the VR when it is explicit.
    fn header(&mut self, syntax: Syntax) -> Result<Option<ElementHeader>, String> {
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
                None,
            )));
        }
        match syntax {
            Syntax::Implicit => {
                let mut length = [0u8; 4];
                self.read(&mut length)?;
                self.last_header_length = 8;
                Ok(Some((group, element, read_u32(length, true), None)))
            }
            Syntax::Explicit { little_endian } => {
                let mut vr = [0u8; 2];
                self.read(&mut vr)?;
                // As dicom-encoding reads it: the 21 VRs of PS3.5 Table 7.1-2 have a 16-bit
                // length; every other VR, an unknown one included (read as UN), a reserved
                // field and a 32-bit length. Walking an unknown VR the other way let a single
                // changed VR byte slip a 4 GB length past this guard.
                let long = !matches!(
                    &vr,
                    b"AE"
                        | b"AS"
                        | b"AT"
                        | b"CS"
                        | b"DA"
                        | b"DS"
                        | b"DT"
                        | b"FL"
                        | b"FD"
                        | b"IS"
                        | b"LO"
                        | b"LT"
                        | b"PN"
                        | b"SH"
                        | b"SL"
                        | b"SS"
                        | b"ST"
                        | b"TM"
                        | b"UI"
                        | b"UL"
                        | b"US"
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
                Ok(Some((group, element, length, Some(vr))))
            }
        }
    }

    fn peek_group_then(&mut self, syntax: Syntax) -> Result<Option<(u16, u16, u32)>, String> {
        Ok(self
            .header(syntax)?
            .map(|(group, element, length, _)| (group, element, length)))
    }

    fn check_depth(&self, depth: usize) -> Result<(), String> {
        if depth > MAX_NESTING {
            return Err(format!(
                "sequences are nested more than {MAX_NESTING} deep at byte {}: the file is damaged or hostile",
                self.position
            ));
        }
        Ok(())
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
        self.reader
            .forward(u64::from(length))
            .map_err(|error| format!("element ({group:04X},{element:04X}): {error}"))?;
        self.position += u64::from(length);
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
