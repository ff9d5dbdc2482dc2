//! `jsonb` values passed through untouched.
//!
//! pgrx's `JsonB` converts through `serde_json` on every crossing (jsonb
//! text out, parsed to a `Value`, printed back in): numbers become `f64`
//! (`12345678901234567890123` comes back as `1.2345678901234568e22`), and a
//! value serde refuses (a number of 400 digits, nesting deeper than 128)
//! becomes an internal error. A stored `result` must reach duplicates
//! exactly as `webhook_complete` received it, so [`Jsonb`] carries the
//! datum itself, and [`Jsonb::to_text`] gives its canonical text where Rust
//! must read it.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::{FromDatum, IntoDatum};

use crate::signature::headers::NotHeaders;

// A container's header flags (src/include/utils/jsonb.h, the same in
// PostgreSQL 13 to 18): a raw scalar is stored as a one-element array
// with JB_FSCALAR set.
const JB_FSCALAR: u32 = 0x1000_0000;
const JB_FOBJECT: u32 = 0x2000_0000;
const JB_FARRAY: u32 = 0x4000_0000;

/// A `jsonb` datum, valid for the memory context it was read in (an
/// argument: the call; a value read by [`crate::spi::Rows::get_jsonb`]: the
/// caller of the SPI connection).
#[derive(Debug, Clone, Copy)]
pub struct Jsonb(pg_sys::Datum);

impl Jsonb {
    /// The value's canonical text (`jsonb_out`).
    pub fn to_text(self) -> String {
        // SAFETY: self.0 is a valid jsonb datum (type contract of the
        // constructors); jsonb_out detoasts it and returns a palloc'd
        // C string, copied here before it is freed.
        unsafe {
            let text = pgrx::direct_function_call::<&core::ffi::CStr>(pg_sys::jsonb_out, &[Some(self.0)])
                .expect("jsonb_out returns a string");
            let owned = text.to_string_lossy().into_owned();
            pg_sys::pfree(text.as_ptr().cast_mut().cast());
            owned
        }
    }

    /// A jsonb value parsed from JSON text (`jsonb_in`); an invalid text
    /// raises jsonb_in's own error (22P02).
    pub fn from_text(text: &str) -> Self {
        let text = std::ffi::CString::new(text).expect("JSON text has no NUL byte");
        // SAFETY: jsonb_in takes a C string and returns a palloc'd jsonb
        // datum in the current memory context.
        let datum = unsafe {
            pgrx::direct_function_call_as_datum(pg_sys::jsonb_in, &[Some(pg_sys::Datum::from(text.as_ptr()))])
        };
        Jsonb(datum.expect("jsonb_in returns a value"))
    }

    /// The members of a JSON object whose values are strings or arrays of
    /// strings, in jsonb's order, each as its name and values (a string
    /// gives one value), read from the binary value itself: no text is
    /// printed or parsed, so the signature check's header map costs one pass
    /// over the datum. Errors name the kind ("a number", "an object", ...)
    /// of the value that is not an object, or the first member (by name,
    /// byte order) whose value is neither a string nor an array of strings
    /// and its kind (or its first element's that is not a string).
    pub fn string_members(self) -> Result<Vec<(String, Vec<String>)>, NotHeaders> {
        // SAFETY: self.0 is a valid jsonb datum (type contract of the
        // constructors); pg_detoast_datum returns it or a palloc'd
        // untoasted copy, and the iterators read its containers, which
        // live as long as that copy (this call's memory context).
        unsafe {
            let jsonb = pg_sys::pg_detoast_datum(self.0.cast_mut_ptr()).cast::<pg_sys::Jsonb>();
            let root = std::ptr::addr_of_mut!((*jsonb).root);
            let header = (*root).header;
            if header & JB_FOBJECT == 0 {
                let kind = if header & JB_FSCALAR != 0 { scalar_kind(root) } else { "an array" };
                return Err(NotHeaders::NotObject(kind));
            }
            let mut members = Vec::new();
            // The offending member reported is the first by name, byte for
            // byte, whatever jsonb's own order (shorter names first).
            let mut bad: Option<(String, &'static str)> = None;
            let mut it = pg_sys::JsonbIteratorInit(root);
            let mut value: pg_sys::JsonbValue = std::mem::zeroed();
            let mut name = String::new();
            loop {
                // The caller chooses how many members there are (a million
                // is a 30 MB value): stay cancellable, and absorb barriers
                // (DROP DATABASE ... WITH (FORCE) waits for every backend).
                pg_sys::check_for_interrupts!();
                match pg_sys::JsonbIteratorNext(&mut it, &mut value, true) {
                    pg_sys::JsonbIteratorToken::WJB_DONE => break,
                    pg_sys::JsonbIteratorToken::WJB_KEY => name = string(&value),
                    pg_sys::JsonbIteratorToken::WJB_VALUE => {
                        let values = match value.type_ {
                            pg_sys::jbvType::jbvString => Ok(vec![string(&value)]),
                            pg_sys::jbvType::jbvBinary if container_is_array(value.val.binary.data) => {
                                array_of_strings(value.val.binary.data)
                            }
                            _ => Err(kind(&value)),
                        };
                        let name = std::mem::take(&mut name);
                        match values {
                            Ok(values) => members.push((name, values)),
                            Err(kind) => {
                                if bad.as_ref().is_none_or(|(first, _)| name < *first) {
                                    bad = Some((name, kind));
                                }
                            }
                        }
                    }
                    _ => {} // WJB_BEGIN_OBJECT, WJB_END_OBJECT
                }
            }
            match bad {
                Some((name, kind)) => Err(NotHeaders::BadValue(name, kind)),
                None => Ok(members),
            }
        }
    }

    /// Wrap a datum known to be a (possibly toasted) jsonb.
    ///
    /// # Safety
    /// `datum` must be a valid jsonb datum that outlives the wrapper's use.
    pub unsafe fn from_raw(datum: pg_sys::Datum) -> Self {
        Jsonb(datum)
    }
}

impl FromDatum for Jsonb {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _: pg_sys::Oid) -> Option<Self> {
        (!is_null).then_some(Jsonb(datum))
    }
}

impl IntoDatum for Jsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

// SAFETY: Jsonb is declared to SQL as jsonb and only ever holds jsonb datums.
unsafe impl SqlTranslatable for Jsonb {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(Jsonb);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("jsonb"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal("jsonb")));
}

// SAFETY: the argument is declared jsonb (SqlTranslatable above), so its
// datum is a jsonb varlena, valid for the call.
unsafe impl<'fcx> ArgAbi<'fcx> for Jsonb {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: as above; NULL is handled by Option<Jsonb>.
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(|| panic!("argument {index} must not be null"))
    }
}

// SAFETY: the datum returned is the jsonb datum itself.
unsafe impl BoxRet for Jsonb {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
        // SAFETY: a valid jsonb datum in a context that outlives the call.
        unsafe { fcinfo.return_raw_datum(self.0) }
    }
}

/// The text of a `jbvString` value (the database encoding's bytes; invalid
/// UTF-8 is replaced, as reading `jsonb_out`'s text lossily did).
///
/// # Safety
/// `value` must be a `jbvString` whose bytes are still allocated.
unsafe fn string(value: &pg_sys::JsonbValue) -> String {
    // SAFETY: per the contract, val.string is the active member.
    unsafe {
        let s = value.val.string;
        let len = usize::try_from(s.len).unwrap_or(0);
        if len == 0 {
            return String::new();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(s.val.cast::<u8>(), len)).into_owned()
    }
}

/// The kind of a value as error messages name it.
///
/// # Safety
/// A `jbvBinary` value's container must still be allocated.
unsafe fn kind(value: &pg_sys::JsonbValue) -> &'static str {
    match value.type_ {
        pg_sys::jbvType::jbvNull => "null",
        pg_sys::jbvType::jbvString => "a string",
        pg_sys::jbvType::jbvNumeric => "a number",
        pg_sys::jbvType::jbvBool => "a boolean",
        // SAFETY: per the contract.
        pg_sys::jbvType::jbvBinary if unsafe { container_is_array(value.val.binary.data) } => "an array",
        _ => "an object",
    }
}

/// # Safety
/// `container` must point to a valid jsonb container.
unsafe fn container_is_array(container: *mut pg_sys::JsonbContainer) -> bool {
    // SAFETY: per the contract.
    unsafe { (*container).header & (JB_FARRAY | JB_FSCALAR) == JB_FARRAY }
}

/// The kind of the raw scalar held by a `JB_FSCALAR` container.
///
/// # Safety
/// `container` must point to a valid scalar container.
unsafe fn scalar_kind(container: *mut pg_sys::JsonbContainer) -> &'static str {
    // SAFETY: per the contract; a scalar container iterates as
    // WJB_BEGIN_ARRAY, one WJB_ELEM, WJB_END_ARRAY.
    unsafe {
        let mut it = pg_sys::JsonbIteratorInit(container);
        let mut value: pg_sys::JsonbValue = std::mem::zeroed();
        loop {
            match pg_sys::JsonbIteratorNext(&mut it, &mut value, true) {
                pg_sys::JsonbIteratorToken::WJB_ELEM => return kind(&value),
                pg_sys::JsonbIteratorToken::WJB_DONE => return "an array",
                _ => {}
            }
        }
    }
}

/// The strings of an array container, or the kind of its first element
/// that is not a string.
///
/// # Safety
/// `container` must point to a valid array container.
unsafe fn array_of_strings(container: *mut pg_sys::JsonbContainer) -> Result<Vec<String>, &'static str> {
    // SAFETY: per the contract; with skipNested, nested containers come
    // back as jbvBinary elements without being entered.
    unsafe {
        let mut it = pg_sys::JsonbIteratorInit(container);
        let mut value: pg_sys::JsonbValue = std::mem::zeroed();
        let mut strings = Vec::new();
        loop {
            pg_sys::check_for_interrupts!(); // as in string_members
            match pg_sys::JsonbIteratorNext(&mut it, &mut value, true) {
                pg_sys::JsonbIteratorToken::WJB_DONE => return Ok(strings),
                pg_sys::JsonbIteratorToken::WJB_ELEM if value.type_ == pg_sys::jbvType::jbvString => {
                    strings.push(string(&value))
                }
                pg_sys::JsonbIteratorToken::WJB_ELEM => return Err(kind(&value)),
                _ => {}
            }
        }
    }
}
