//! An immutable, cheaply cloned run of `f32` shared with whatever owns the values: a decoded
//! column's buffer (the I/O layer hands its Arrow buffer over as is) or a `Vec` the pipeline
//! computed. The maths sees a `&[f32]`; nobody copies the values to pass them on.

use std::fmt;
use std::ops::Deref;
use std::panic::RefUnwindSafe;
use std::sync::Arc;

/// What holds a [`FloatBuffer`]'s values. `RefUnwindSafe` so that the I/O layer can hand the
/// owner back to Arrow as a buffer's allocation without copying.
type Owner = dyn AsRef<[f32]> + Send + Sync + RefUnwindSafe;

/// Flat `f32` values shared with their owner; clones share the owner. Reads as a `&[f32]`.
#[derive(Clone)]
pub struct FloatBuffer {
    owner: Arc<Owner>,
}

impl FloatBuffer {
    /// The values `owner` holds, shared (not copied) for as long as any clone lives.
    pub fn new(owner: impl AsRef<[f32]> + Send + Sync + RefUnwindSafe + 'static) -> Self {
        FloatBuffer {
            owner: Arc::new(owner),
        }
    }

    /// The values.
    #[inline]
    pub fn as_slice(&self) -> &[f32] {
        (*self.owner).as_ref()
    }
}

impl Deref for FloatBuffer {
    type Target = [f32];

    #[inline]
    fn deref(&self) -> &[f32] {
        self.as_slice()
    }
}

impl AsRef<[f32]> for FloatBuffer {
    #[inline]
    fn as_ref(&self) -> &[f32] {
        self.as_slice()
    }
}

impl<'a> IntoIterator for &'a FloatBuffer {
    type Item = &'a f32;
    type IntoIter = std::slice::Iter<'a, f32>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl Default for FloatBuffer {
    fn default() -> Self {
        FloatBuffer::new(Vec::new())
    }
}

/// The vector becomes the owner: no copy.
impl From<Vec<f32>> for FloatBuffer {
    fn from(values: Vec<f32>) -> Self {
        FloatBuffer::new(values)
    }
}

impl FromIterator<f32> for FloatBuffer {
    fn from_iter<I: IntoIterator<Item = f32>>(iter: I) -> Self {
        FloatBuffer::new(iter.into_iter().collect::<Vec<f32>>())
    }
}

impl fmt::Debug for FloatBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// Equal values, wherever they live.
impl PartialEq for FloatBuffer {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_owners_values() {
        let v = vec![1.0f32, 2.0, 3.0];
        let at = v.as_ptr();
        let a = FloatBuffer::from(v);
        let b = a.clone();
        assert_eq!(a.as_ptr(), at);
        assert_eq!(b.as_ptr(), at);
        assert_eq!(&b[1..], &[2.0, 3.0]);
        assert_eq!(FloatBuffer::default().len(), 0);
    }
}
