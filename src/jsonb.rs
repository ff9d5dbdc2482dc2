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
