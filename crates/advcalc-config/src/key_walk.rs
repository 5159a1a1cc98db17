//! The walk over a `settings!` list's dotted keys ([`Walk`], which the maths declares) over
//! the configuration's sections: a top-level key is read from the section itself, `sub.key`
//! from the subsection `sub`, each subsection opened once and its unknown keys refused when
//! the walk leaves it.

use super::section::Section;
use crate::error::Result;
use crate::settings::{Keys, Walk};

/// The walk over the `settings!` list in its order: a top-level key is read from the
/// section itself, `sub.key` from the subsection `sub`, opened at its first key and checked
/// for unknown keys when the walk leaves it (the list keeps each subsection's keys together).
pub struct KeyWalk<'s, 'o> {
    root: &'s mut Section<'o>,
    /// The subsection being read (`None` inside: absent or null).
    open: Option<(&'static str, Option<Section<'o>>)>,
}

impl<'s, 'o> KeyWalk<'s, 'o> {
    pub fn new(root: &'s mut Section<'o>) -> Self {
        KeyWalk { root, open: None }
    }

    /// Leave the open subsection: its unknown keys are refused.
    pub fn close(&mut self) -> Result<()> {
        if let Some((_, Some(mut section))) = self.open.take() {
            section.finish()?;
        }
        Ok(())
    }
}

impl Walk for KeyWalk<'_, '_> {
    /// The section holding `key` (`None`: its subsection is absent) and the key within it.
    fn at(&mut self, key: &'static str) -> Result<(Option<&mut dyn Keys>, &'static str)> {
        let Some((sub, leaf)) = key.split_once('.') else {
            self.close()?;
            return Ok((Some(&mut *self.root), key));
        };
        if self.open.as_ref().is_none_or(|(open, _)| *open != sub) {
            self.close()?;
            self.open = Some((sub, self.root.subsection(sub)?));
        }
        let section = self.open.as_mut().and_then(|(_, s)| s.as_mut());
        Ok((section.map(|s| s as &mut dyn Keys), leaf))
    }
}
