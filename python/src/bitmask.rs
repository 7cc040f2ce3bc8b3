//! Writing masks into a caller's int32 bitmask, in place.
//!
//! The bitmask is what vLLM, SGLang and XGrammar pass around: an int32 array of shape
//! `[batch, ceil(vocab_size / 32)]` (or one row, `[words]`), bit `i % 32` of word `i / 32` set
//! when token `i` is allowed. strictly's [`TokenSet`] has that layout already, so filling a row
//! is a copy of its words (and zeros past them).
//!
//! The binding is built for the stable ABI of Python 3.9 (`abi3`), whose limited C API has no
//! buffer protocol (it came in 3.11), so the array is reached through the protocols the two
//! array libraries publish instead: for numpy arrays the array interface's C struct
//! (`__array_struct__`, read in a fraction of a microsecond), for torch tensors `data_ptr()`
//! with `dtype`, `is_cpu`, `shape` and `is_contiguous()`, and for any other object with one,
//! the array interface's Python side (`__array_interface__`). A tensor on a GPU is refused: fill a CPU (pinned) tensor and
//! copy it over, as the engines' own CPU backends do.
//!
//! Invariants checked before any write: 32-bit integer elements, writable, C-contiguous,
//! 4-byte aligned, one or two dimensions; the row index inside the batch; rows at least as
//! wide as the vocabulary needs. The caller's array object is held for the whole call, so its
//! memory stays alive while the GIL is released; writing to the same array from another
//! thread at the same time is the caller's race, as with any in-place kernel.

use std::ffi::{c_char, c_int, c_void};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::{ffi, intern};
use strictly::TokenSet;

use crate::errors::param;

/// A checked view of the caller's bitmask: `rows` rows of `words` 32-bit words from `ptr`.
pub struct Bitmask<'py> {
    ptr: *mut u32,
    pub rows: usize,
    pub words: usize,
    /// Keeps the array alive while its memory is written.
    _owner: Bound<'py, PyAny>,
}

/// The raw rows, to be written with the GIL released: the owner stays alive in the caller's
/// frame (a [`Bitmask`] outlives every use of this).
pub struct Rows {
    ptr: *mut u32,
    pub rows: usize,
    pub words: usize,
}

// The rows point into an array that the calling frame keeps alive; each is written by one
// thread (see `split`).
unsafe impl Send for Rows {}
unsafe impl Sync for Rows {}

const EXPECTED: &str = "the bitmask must be an int32 numpy array or torch tensor of shape [batch, ceil(vocab_size/32)]";

impl<'py> Bitmask<'py> {
    /// Checks `obj` and returns its rows (see the module docs for what is checked).
    pub fn of(obj: &Bound<'py, PyAny>) -> PyResult<Bitmask<'py>> {
        let py = obj.py();
        let (ptr, shape) = if let Some(found) = array_struct(obj)? {
            found
        } else if obj.hasattr(intern!(py, "data_ptr"))? {
            torch_tensor(obj)?
        } else if let Ok(iface) = obj.getattr(intern!(py, "__array_interface__")) {
            array_interface(iface.cast::<PyDict>().map_err(|_| param(EXPECTED))?)?
        } else {
            return Err(param(format!("{EXPECTED}; got {}", obj.get_type().name()?)));
        };
        let (rows, words) = match shape.as_slice() {
            [w] => (1, *w),
            [r, w] => (*r, *w),
            _ => return Err(param(format!("{EXPECTED}; got {} dimensions", shape.len()))),
        };
        if ptr % 4 != 0 {
            return Err(param("the bitmask's data is not 4-byte aligned"));
        }
        if ptr == 0 && rows * words > 0 {
            return Err(param("the bitmask has no data"));
        }
        Ok(Bitmask { ptr: ptr as *mut u32, rows, words, _owner: obj.clone() })
    }

    /// The rows, to write with the GIL released while `self` is alive.
    pub fn rows(&self) -> Rows {
        Rows { ptr: self.ptr, rows: self.rows, words: self.words }
    }
}

impl Rows {
    /// Every row as its own slice, in order (so each can go to one thread).
    pub fn split(&mut self) -> Vec<&mut [u32]> {
        if self.rows * self.words == 0 {
            return (0..self.rows).map(|_| <&mut [u32]>::default()).collect();
        }
        // SAFETY: the array was checked to hold rows * words aligned, writable, contiguous u32s
        // and is kept alive by the `Bitmask` this came from; `&mut self` hands out each row once.
        let all = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.rows * self.words) };
        all.chunks_mut(self.words).collect()
    }
}

/// Copies `mask` into `row`: its words, then zeros (nothing allowed) to the row's end.
pub fn write_row(mask: &TokenSet, row: &mut [u32]) {
    let words = mask.words();
    row[..words.len()].copy_from_slice(words);
    row[words.len()..].fill(0);
}

/// numpy's `PyArrayInterface`, the C struct inside an `__array_struct__` capsule (the array
/// interface's C side, stable since numpy 1.0): read in well under a microsecond, where the
/// Python side (`__array_interface__`, a new dict each time) takes one or two.
#[repr(C)]
struct ArrayInterface {
    /// Always 2.
    two: c_int,
    nd: c_int,
    typekind: c_char,
    itemsize: c_int,
    flags: c_int,
    shape: *const isize,
    strides: *const isize,
    data: *mut c_void,
    descr: *mut ffi::PyObject,
}

const C_CONTIGUOUS: c_int = 0x0001;
const NOTSWAPPED: c_int = 0x0200;
const WRITEABLE: c_int = 0x0400;

/// Pointer and shape from `__array_struct__` (numpy arrays), or `None` when `obj` has none.
fn array_struct(obj: &Bound<'_, PyAny>) -> PyResult<Option<(usize, Vec<usize>)>> {
    if obj.get_type().name()? != "ndarray" {
        return Ok(None);
    }
    let Ok(capsule) = obj.getattr(intern!(obj.py(), "__array_struct__")) else { return Ok(None) };
    // SAFETY: `__array_struct__` is a capsule (no name) holding a `PyArrayInterface` that stays
    // valid while the capsule lives; it is read here, while `capsule` is held.
    let p = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null()) } as *const ArrayInterface;
    if p.is_null() {
        // Not the capsule we know: clear the error and let the Python-level interface answer.
        let _ = PyErr::take(obj.py());
        return Ok(None);
    }
    // SAFETY: as above; `nd` entries of `shape` (and of `strides`, when not null) follow.
    let a = unsafe { &*p };
    if a.two != 2 || a.nd < 0 {
        return Ok(None);
    }
    if !matches!(a.typekind as u8, b'i' | b'u') || a.itemsize != 4 {
        return Err(param(format!(
            "{EXPECTED}; its elements are {}{}, not int32",
            a.typekind as u8 as char, a.itemsize
        )));
    }
    if a.flags & WRITEABLE == 0 {
        return Err(param("the bitmask is read-only"));
    }
    if a.flags & NOTSWAPPED == 0 {
        return Err(param("the bitmask is not in the machine's byte order"));
    }
    let nd = a.nd as usize;
    let shape: Vec<usize> = unsafe { std::slice::from_raw_parts(a.shape, nd) }.iter().map(|&n| n as usize).collect();
    if a.flags & C_CONTIGUOUS == 0 && !a.strides.is_null() {
        let strides = unsafe { std::slice::from_raw_parts(a.strides, nd) };
        check_c_order(&shape, strides)?;
    }
    Ok(Some((a.data as usize, shape)))
}

/// Errors unless `strides` (bytes) lay `shape` out in C order with 4-byte items.
fn check_c_order(shape: &[usize], strides: &[isize]) -> PyResult<()> {
    let mut want = 4isize;
    for (i, &n) in shape.iter().enumerate().rev() {
        if n > 1 && strides[i] != want {
            return Err(param("the bitmask is not C-contiguous (a strided view): pass a contiguous array"));
        }
        want *= n as isize;
    }
    Ok(())
}

/// Pointer and shape from numpy's array interface (version 3).
fn array_interface(d: &Bound<'_, PyDict>) -> PyResult<(usize, Vec<usize>)> {
    let get =
        |k: &str| d.get_item(k)?.ok_or_else(|| param(format!("{EXPECTED}; its __array_interface__ has no {k:?}")));
    let typestr: String = get("typestr")?.extract()?;
    if !matches!(typestr.as_str(), "<i4" | "<u4" | "=i4" | "=u4" | "|i4") {
        return Err(param(format!("{EXPECTED}; its elements are {typestr:?}, not int32")));
    }
    let (ptr, readonly): (usize, bool) = get("data")?.extract()?;
    if readonly {
        return Err(param("the bitmask is read-only"));
    }
    let shape: Vec<usize> = get("shape")?.extract()?;
    if let Some(strides) = d.get_item("strides")?.filter(|s| !s.is_none()) {
        let strides: Vec<isize> = strides.extract()?;
        if strides.len() != shape.len() {
            return Err(param("the bitmask's strides do not match its shape"));
        }
        check_c_order(&shape, &strides)?;
    }
    Ok((ptr, shape))
}

/// `torch.int32`, looked up once (torch is imported already: a tensor was passed).
fn torch_int32(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static INT32: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    INT32.get_or_try_init(py, || Ok::<_, PyErr>(py.import("torch")?.getattr("int32")?.unbind())).map(|t| t.bind(py))
}

/// Pointer and shape of a torch tensor on the CPU.
fn torch_tensor(t: &Bound<'_, PyAny>) -> PyResult<(usize, Vec<usize>)> {
    let py = t.py();
    if !t.getattr(intern!(py, "is_cpu"))?.extract::<bool>()? {
        let device: String = t.getattr(intern!(py, "device"))?.str()?.extract()?;
        return Err(param(format!(
            "the bitmask is on {device}: fill a CPU tensor (pinned memory makes the copy cheap) and copy it to the device"
        )));
    }
    let dtype = t.getattr(intern!(py, "dtype"))?;
    if !dtype.eq(torch_int32(py)?)? {
        return Err(param(format!("{EXPECTED}; got a {} tensor", dtype.str()?)));
    }
    if !t.call_method0(intern!(py, "is_contiguous"))?.extract::<bool>()? {
        return Err(param("the bitmask tensor is not contiguous: pass bitmask.contiguous()"));
    }
    let shape: Vec<usize> = t.getattr(intern!(py, "shape"))?.extract()?;
    let ptr: usize = t.call_method0(intern!(py, "data_ptr"))?.extract()?;
    Ok((ptr, shape))
}
