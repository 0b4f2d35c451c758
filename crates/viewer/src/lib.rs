//! The viewer: GPU rendering of CT slices ([`render`]), the panels ([`ui`]) and the eframe
//! application that wires them to workspaces, analysis and export ([`app`]).
//!
//! [`render`] knows volumes and textures only; [`ui`] knows the core types and the review
//! state but not how a prediction was made; [`app`] owns the state and the background jobs.

pub mod app;
pub mod render;
pub mod ui;
