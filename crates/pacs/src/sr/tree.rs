//! The SR content tree, independent of any template: content items with their relationship
//! to the parent, written to and read from the Content Sequence of a DICOM data set.

use dicom_core::value::DataSetSequence;
use dicom_core::{DataElement, PrimitiveValue, Tag, VR};
use dicom_dictionary_std::tags;
use dicom_object::InMemDicomObject;
use keyslice_io::dicom::write::text;

use super::codes::Code;

/// A content item's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// CONTAINER (SEPARATE continuity), with a template identifier when it starts one.
    Container(Option<&'static str>),
    /// CODE.
    Code(Code),
    /// TEXT.
    Text(String),
    /// NUM with its units.
    Num(f64, Code),
    /// UIDREF.
    UidRef(String),
    /// PNAME.
    PersonName(String),
    /// IMAGE: SOP Class UID and SOP Instance UID.
    Image(String, String),
    /// SCOORD: graphic type and (column, row) points.
    Scoord(String, Vec<f32>),
}

/// One content item and its children.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Relationship to the parent (`CONTAINS`, `HAS CONCEPT MOD`…); empty for the root.
    pub relationship: &'static str,
    /// Concept Name.
    pub name: Code,
    /// Value.
    pub value: Value,
    /// Children.
    pub children: Vec<Node>,
}

impl Node {
    /// An item.
    #[must_use]
    pub fn new(relationship: &'static str, name: Code, value: Value) -> Self {
        Self {
            relationship,
            name,
            value,
            children: Vec::new(),
        }
    }

    /// The same item with `children`.
    #[must_use]
    pub fn with(mut self, children: Vec<Node>) -> Self {
        self.children = children;
        self
    }

    /// The first child named `name`.
    #[must_use]
    pub fn child(&self, name: &Code) -> Option<&Node> {
        self.children
            .iter()
            .find(|child| child.name.is(&name.value, &name.scheme))
    }

    /// Every child named `name`.
    pub fn children_named<'a>(&'a self, name: &'a Code) -> impl Iterator<Item = &'a Node> + 'a {
        self.children
            .iter()
            .filter(|child| child.name.is(&name.value, &name.scheme))
    }

    /// The value as a code.
    #[must_use]
    pub fn code(&self) -> Option<&Code> {
        match &self.value {
            Value::Code(code) => Some(code),
            _ => None,
        }
    }

    /// The value as text (TEXT, UIDREF, PNAME).
    #[must_use]
    pub fn text(&self) -> Option<&str> {
        match &self.value {
            Value::Text(text) | Value::UidRef(text) | Value::PersonName(text) => Some(text),
            _ => None,
        }
    }

    /// The value as a number.
    #[must_use]
    pub fn number(&self) -> Option<f64> {
        match &self.value {
            Value::Num(number, _) => Some(*number),
            _ => None,
        }
    }
}

/// A sequence element of `items`.
#[must_use]
pub fn sequence(tag: Tag, items: Vec<InMemDicomObject>) -> DataElement<InMemDicomObject> {
    DataElement::new(tag, VR::SQ, DataSetSequence::from(items))
}

/// A code sequence item (Code Value, Coding Scheme Designator, Code Meaning).
#[must_use]
pub fn code_item(code: &Code) -> InMemDicomObject {
    let mut item = InMemDicomObject::new_empty();
    item.put(text(tags::CODE_VALUE, VR::SH, &code.value));
    item.put(text(tags::CODING_SCHEME_DESIGNATOR, VR::SH, &code.scheme));
    item.put(text(tags::CODE_MEANING, VR::LO, &code.meaning));
    item
}

/// A reference to one SOP instance (Referenced SOP Class / Instance UID).
#[must_use]
pub fn sop_reference(class_uid: &str, instance_uid: &str) -> InMemDicomObject {
    let mut item = InMemDicomObject::new_empty();
    item.put(text(tags::REFERENCED_SOP_CLASS_UID, VR::UI, class_uid));
    item.put(text(
        tags::REFERENCED_SOP_INSTANCE_UID,
        VR::UI,
        instance_uid,
    ));
    item
}

/// A decimal string of at most 16 characters for `value`.
#[must_use]
pub fn decimal_string(value: f64) -> String {
    for decimals in (0..=6).rev() {
        let text = format!("{value:.decimals$}");
        let text = if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        };
        if text.len() <= 16 {
            return text;
        }
    }
    format!("{value:.0}")
}

/// Puts the item's attributes (value type, concept name, value, children) into `object`.
pub fn put_item(object: &mut InMemDicomObject, node: &Node) {
    let value_type = match &node.value {
        Value::Container(_) => "CONTAINER",
        Value::Code(_) => "CODE",
        Value::Text(_) => "TEXT",
        Value::Num(..) => "NUM",
        Value::UidRef(_) => "UIDREF",
        Value::PersonName(_) => "PNAME",
        Value::Image(..) => "IMAGE",
        Value::Scoord(..) => "SCOORD",
    };
    if !node.relationship.is_empty() {
        object.put(text(tags::RELATIONSHIP_TYPE, VR::CS, node.relationship));
    }
    object.put(text(tags::VALUE_TYPE, VR::CS, value_type));
    // An IMAGE selected from or listed in a library may go without a concept name.
    if !node.name.value.is_empty() {
        object.put(sequence(
            tags::CONCEPT_NAME_CODE_SEQUENCE,
            vec![code_item(&node.name)],
        ));
    }
    match &node.value {
        Value::Container(template) => {
            object.put(text(tags::CONTINUITY_OF_CONTENT, VR::CS, "SEPARATE"));
            if let Some(template) = template {
                let mut item = InMemDicomObject::new_empty();
                item.put(text(tags::MAPPING_RESOURCE, VR::CS, "DCMR"));
                item.put(text(tags::TEMPLATE_IDENTIFIER, VR::CS, template));
                object.put(sequence(tags::CONTENT_TEMPLATE_SEQUENCE, vec![item]));
            }
        }
        Value::Code(code) => {
            object.put(sequence(tags::CONCEPT_CODE_SEQUENCE, vec![code_item(code)]));
        }
        Value::Text(value) => {
            object.put(text(tags::TEXT_VALUE, VR::UT, value));
        }
        Value::UidRef(value) => {
            object.put(text(tags::UID, VR::UI, value));
        }
        Value::PersonName(value) => {
            object.put(text(tags::PERSON_NAME, VR::PN, value));
        }
        Value::Num(number, units) => {
            let mut measured = InMemDicomObject::new_empty();
            measured.put(text(tags::NUMERIC_VALUE, VR::DS, &decimal_string(*number)));
            measured.put(DataElement::new(
                tags::FLOATING_POINT_VALUE,
                VR::FD,
                PrimitiveValue::from(*number),
            ));
            measured.put(sequence(
                tags::MEASUREMENT_UNITS_CODE_SEQUENCE,
                vec![code_item(units)],
            ));
            object.put(sequence(tags::MEASURED_VALUE_SEQUENCE, vec![measured]));
        }
        Value::Image(class_uid, instance_uid) => {
            object.put(sequence(
                tags::REFERENCED_SOP_SEQUENCE,
                vec![sop_reference(class_uid, instance_uid)],
            ));
        }
        Value::Scoord(graphic_type, points) => {
            object.put(text(tags::GRAPHIC_TYPE, VR::CS, graphic_type));
            object.put(DataElement::new(
                tags::GRAPHIC_DATA,
                VR::FL,
                PrimitiveValue::F32(points.iter().copied().collect()),
            ));
        }
    }
    if !node.children.is_empty() {
        let items = node
            .children
            .iter()
            .map(|child| {
                let mut item = InMemDicomObject::new_empty();
                put_item(&mut item, child);
                item
            })
            .collect();
        object.put(sequence(tags::CONTENT_SEQUENCE, items));
    }
}

/// The first item of a sequence attribute.
#[must_use]
pub fn first_item(object: &InMemDicomObject, tag: Tag) -> Option<&InMemDicomObject> {
    object.element_opt(tag).ok()??.items()?.first()
}

/// Every item of a sequence attribute.
#[must_use]
pub fn items(object: &InMemDicomObject, tag: Tag) -> &[InMemDicomObject] {
    object
        .element_opt(tag)
        .ok()
        .flatten()
        .and_then(|element| element.items())
        .unwrap_or(&[])
}

/// A string attribute, trimmed of DICOM padding.
#[must_use]
pub fn string(object: &InMemDicomObject, tag: Tag) -> Option<String> {
    let element = object.element_opt(tag).ok()??;
    let value = element.to_str().ok()?;
    let value = value.trim_end_matches(['\0', ' ']).trim_start();
    Some(value.to_string())
}

/// The code of a code sequence item.
#[must_use]
pub fn read_code(item: &InMemDicomObject) -> Option<Code> {
    Some(Code {
        value: string(item, tags::CODE_VALUE)
            .or_else(|| string(item, tags::LONG_CODE_VALUE))
            .or_else(|| string(item, tags::URN_CODE_VALUE))?,
        scheme: string(item, tags::CODING_SCHEME_DESIGNATOR).unwrap_or_default(),
        meaning: string(item, tags::CODE_MEANING).unwrap_or_default(),
    })
}

/// The deepest content tree read (Keyslice writes four levels; TID 1500 needs few more).
pub const MAX_DEPTH: usize = 16;

/// Reads a content item and its children (items of a value type Keyslice does not use are
/// kept as TEXT of their type, so the tree's shape survives). A tree deeper than
/// [`MAX_DEPTH`] is refused.
pub fn read_item(object: &InMemDicomObject) -> Result<Node, NotReadable> {
    read_item_at(object, 0).map_err(|reason| NotReadable { reason })
}

/// A document (or a content item of one) that is not what it should be: what is wrong, in
/// words that name the item.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct NotReadable {
    /// What is wrong.
    pub reason: String,
}

fn read_item_at(object: &InMemDicomObject, depth: usize) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "the content tree is nested deeper than {MAX_DEPTH} levels"
        ));
    }
    let value_type = string(object, tags::VALUE_TYPE).ok_or("a content item has no Value Type")?;
    let name = first_item(object, tags::CONCEPT_NAME_CODE_SEQUENCE)
        .and_then(read_code)
        .unwrap_or_else(|| Code::new("", "", ""));
    let value = match value_type.as_str() {
        "CONTAINER" => Value::Container(None),
        "CODE" => Value::Code(
            first_item(object, tags::CONCEPT_CODE_SEQUENCE)
                .and_then(read_code)
                .ok_or_else(|| format!("CODE item `{}` has no Concept Code", name.meaning))?,
        ),
        "TEXT" => Value::Text(string(object, tags::TEXT_VALUE).unwrap_or_default()),
        "UIDREF" => Value::UidRef(string(object, tags::UID).unwrap_or_default()),
        "PNAME" => Value::PersonName(string(object, tags::PERSON_NAME).unwrap_or_default()),
        "NUM" => {
            let measured = first_item(object, tags::MEASURED_VALUE_SEQUENCE);
            let number = measured
                .and_then(|m| {
                    m.element_opt(tags::FLOATING_POINT_VALUE)
                        .ok()
                        .flatten()
                        .and_then(|e| e.to_float64().ok())
                        .or_else(|| string(m, tags::NUMERIC_VALUE)?.trim().parse().ok())
                })
                .ok_or_else(|| format!("NUM item `{}` has no value", name.meaning))?;
            let units = measured
                .and_then(|m| first_item(m, tags::MEASUREMENT_UNITS_CODE_SEQUENCE))
                .and_then(read_code)
                .unwrap_or_else(super::codes::no_units);
            Value::Num(number, units)
        }
        "IMAGE" => {
            let reference = first_item(object, tags::REFERENCED_SOP_SEQUENCE)
                .ok_or_else(|| format!("IMAGE item `{}` references nothing", name.meaning))?;
            Value::Image(
                string(reference, tags::REFERENCED_SOP_CLASS_UID).unwrap_or_default(),
                string(reference, tags::REFERENCED_SOP_INSTANCE_UID).unwrap_or_default(),
            )
        }
        "SCOORD" => Value::Scoord(
            string(object, tags::GRAPHIC_TYPE).unwrap_or_default(),
            object
                .element_opt(tags::GRAPHIC_DATA)
                .ok()
                .flatten()
                .and_then(|e| e.to_multi_float32().ok())
                .unwrap_or_default(),
        ),
        other => Value::Text(format!("({other})")),
    };
    let relationship = match string(object, tags::RELATIONSHIP_TYPE).as_deref() {
        Some("CONTAINS") => "CONTAINS",
        Some("HAS OBS CONTEXT") => "HAS OBS CONTEXT",
        Some("HAS CONCEPT MOD") => "HAS CONCEPT MOD",
        Some("HAS PROPERTIES") => "HAS PROPERTIES",
        Some("INFERRED FROM") => "INFERRED FROM",
        Some("SELECTED FROM") => "SELECTED FROM",
        Some("HAS ACQ CONTEXT") => "HAS ACQ CONTEXT",
        _ => "",
    };
    let children = items(object, tags::CONTENT_SEQUENCE)
        .iter()
        .map(|child| read_item_at(child, depth + 1))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Node {
        relationship,
        name,
        value,
        children,
    })
}
