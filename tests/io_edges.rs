//! I/O edges: sizes a damaged file declares beyond itself are one-line data errors before
//! anything of that size is allocated; the computed list columns follow the input's list
//! convention (child name and nullability) in Parquet and Arrow IPC outputs.

mod common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Float32Builder, Int8Builder, ListBuilder, RecordBatch};
use arrow::datatypes::{DataType, Field, SchemaRef};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use common::*;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, ParquetMetaDataWriter};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};

// ---------------------------------------------------------------------------------------
// Declared sizes beyond the file

/// A valid input: uid, response_mask, rm_scores, and `values` (which grpo copies unread);
/// one row group, plain pages without dictionaries, uncompressed.
fn valid_input(path: &Path) {
    let mut batch = grpo_batch();
    let values = f32_lists(&[vec![0.1, 0.2], vec![0.0; 3], vec![0.5], vec![0.3, 0.4]]);
    let mut columns = batch.columns().to_vec();
    columns.push(values);
    let mut fields: Vec<Arc<Field>> = batch.schema().fields().to_vec();
    fields.push(Arc::new(Field::new(
        "values",
        columns[3].data_type().clone(),
        true,
    )));
    batch = RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns).unwrap();
    let props = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        File::create(path).unwrap(),
        batch.schema(),
        Some(props),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn footer(bytes: &[u8]) -> (ParquetMetaData, usize) {
    let len = bytes.len();
    let declared = u32::from_le_bytes(bytes[len - 8..len - 4].try_into().unwrap()) as usize;
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::copy_from_slice(bytes))
        .unwrap();
    (metadata, len - 8 - declared)
}

/// The file with its footer rewritten: `edit` changes column `column` of row group 0.
fn with_column_chunk(
    bytes: &[u8],
    column: usize,
    edit: impl Fn(
        parquet::file::metadata::ColumnChunkMetaDataBuilder,
    ) -> parquet::file::metadata::ColumnChunkMetaDataBuilder,
) -> Vec<u8> {
    let (metadata, data_end) = footer(bytes);
    let rg = metadata.row_group(0).clone();
    let mut columns = rg.columns().to_vec();
    columns[column] = edit(columns[column].clone().into_builder())
        .build()
        .unwrap();
    let rg = rg
        .into_builder()
        .set_column_metadata(columns)
        .build()
        .unwrap();
    let metadata = metadata.into_builder().set_row_groups(vec![rg]).build();
    let mut out = bytes[..data_end].to_vec();
    ParquetMetaDataWriter::new(&mut out, &metadata)
        .finish()
        .unwrap();
    out
}

/// Run grpo on `bytes` as IN and check a clean, quick, small failure: exit 1, one `error:`
/// line (then `caused by:` lines) holding `needles`, no panic or allocation failure, no
/// OUT and no temporary file.
fn assert_refused(name: &str, bytes: &[u8], needles: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("in.parquet"), bytes).unwrap();
    for args in [
        &["run", "-q", "-e", "grpo", "in.parquet", "out.parquet"][..],
        &["run", "-q", "-e", "grpo", "in.parquet", "out.arrow"][..],
        &["inspect", "in.parquet"][..],
    ] {
        let start = Instant::now();
        let out = run_in(dir, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name} {args:?}: {err}");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{name} {args:?}: took {:?}",
            start.elapsed()
        );
        for bad in ["panicked", "memory allocation", "overflow"] {
            assert!(!err.contains(bad), "{name} {args:?}: {err}");
        }
        let mut lines = err.lines();
        let first = lines.next().unwrap_or_default();
        assert!(first.starts_with("error: in.parquet: "), "{name}: {first}");
        for n in needles {
            assert!(first.contains(n), "{name}: `{n}` not in: {first}");
        }
        for rest in lines {
            assert!(
                rest.starts_with("caused by: "),
                "{name}: extra line: {rest}"
            );
        }
        for o in ["out.parquet", "out.arrow"] {
            assert!(!dir.join(o).exists(), "{name}: {o} left behind");
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".advcalc-"))
            .collect();
        assert!(leftovers.is_empty(), "{name}: {leftovers:?}");
    }
    assert_small_children(name);
}

/// No advcalc child of this test process ever held gigabytes: a buffer of a declared size
/// (2^32 or 2^40 bytes) was never allocated and filled.
fn assert_small_children(name: &str) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage fills the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        assert_eq!(
            unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
            0
        );
        // kibibytes on Linux
        assert!(
            usage.ru_maxrss < 1 << 20,
            "{name}: a child used {} KiB",
            usage.ru_maxrss
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}

#[test]
fn the_valid_input_runs() {
    let tmp = tempfile::tempdir().unwrap();
    valid_input(&tmp.path().join("in.parquet"));
    let out = run_in(
        tmp.path(),
        &["run", "-q", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_footer_longer_than_the_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    valid_input(&tmp.path().join("in.parquet"));
    let mut bytes = std::fs::read(tmp.path().join("in.parquet")).unwrap();
    let len = bytes.len();
    for declared in [u32::MAX, len as u32 - 11] {
        bytes[len - 8..len - 4].copy_from_slice(&declared.to_le_bytes());
        assert_refused(
            "footer length",
            &bytes,
            &[
                "not a readable Parquet file",
                &format!("its footer declares {declared} bytes of metadata"),
                &format!("the file's {len} bytes"),
            ],
        );
    }
}

#[test]
fn column_chunks_outside_the_file_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    valid_input(&tmp.path().join("in.parquet"));
    let bytes = std::fs::read(tmp.path().join("in.parquet")).unwrap();
    let (metadata, data_end) = footer(&bytes);
    let scores = metadata.row_group(0).column(2).clone();
    let (start, size) = scores.byte_range();
    // (column, edit, needle): rm_scores (decoded) 2^40 bytes long; `values` (only ever
    // copied into OUT, never decoded) one byte into the footer; a chunk that starts past
    // the end of the file; a negative size.
    type Edit = Box<
        dyn Fn(
            parquet::file::metadata::ColumnChunkMetaDataBuilder,
        ) -> parquet::file::metadata::ColumnChunkMetaDataBuilder,
    >;
    let values = metadata.row_group(0).column(3).clone();
    let (vstart, _) = values.byte_range();
    let cases: Vec<(usize, Edit, String)> = vec![
        (
            2,
            Box::new(|b| b.set_total_compressed_size(1 << 40)),
            format!(
                "row group 0, column rm_scores.list.item: the column chunk declares {} bytes at offset {start}",
                1u64 << 40
            ),
        ),
        (
            3,
            Box::new(move |b| b.set_total_compressed_size((data_end as u64 - vstart + 1) as i64)),
            "row group 0, column values.list.item".to_string(),
        ),
        (
            2,
            Box::new(|b| b.set_data_page_offset(1 << 40)),
            format!("at offset {}", 1u64 << 40),
        ),
        (
            2,
            Box::new(|b| b.set_total_compressed_size(-1)),
            "declares -1 bytes".to_string(),
        ),
    ];
    assert!(size > 0);
    for (column, edit, needle) in cases {
        let patched = with_column_chunk(&bytes, column, edit);
        assert_refused(
            "column chunk",
            &patched,
            &[
                &needle,
                &format!("outside the file's data (bytes 4 to {})", {
                    let (_, end) = footer(&patched);
                    end
                }),
            ],
        );
    }
}

/// The zigzag varint of a thrift compact i32.
fn varint(v: i32) -> Vec<u8> {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    let mut out = Vec::new();
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return out;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

#[test]
fn a_page_longer_than_its_column_chunk_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    valid_input(&tmp.path().join("in.parquet"));
    let bytes = std::fs::read(tmp.path().join("in.parquet")).unwrap();
    let (metadata, _) = footer(&bytes);
    // rm_scores' page header (grpo decodes that column) declares i32::MAX bytes, or the
    // whole chunk's size after its header; the varint may grow, so the next chunk
    // (`values`) moves along, and its offset in the footer with it.
    let scores = metadata.row_group(0).column(2).clone();
    let page = scores.data_page_offset() as usize;
    // PageHeader: 1: type (i32, DATA_PAGE = 0), 2: uncompressed_page_size,
    // 3: compressed_page_size, in thrift's compact encoding.
    assert_eq!(
        &bytes[page..page + 3],
        &[0x15, 0x00, 0x15],
        "a v1 data page header"
    );
    let mut at = page + 3;
    while bytes[at] & 0x80 != 0 {
        at += 1;
    }
    at += 1;
    assert_eq!(bytes[at], 0x15, "compressed_page_size follows");
    at += 1;
    let mut end = at;
    while bytes[end] & 0x80 != 0 {
        end += 1;
    }
    end += 1;
    for declared in [i32::MAX, scores.compressed_size() as i32] {
        let huge = varint(declared);
        let grown = huge.len() - (end - at);
        let mut patched = bytes[..at].to_vec();
        patched.extend_from_slice(&huge);
        patched.extend_from_slice(&bytes[end..]);
        // the footer again, with the chunks after the patch moved along
        let (_, data_end) = footer(&patched);
        let mut data = patched[..data_end].to_vec();
        let rg = metadata.row_group(0).clone();
        let columns = rg
            .columns()
            .iter()
            .map(|c| {
                let b = c.clone().into_builder();
                let b = if c.data_page_offset() as usize > page {
                    b.set_data_page_offset(c.data_page_offset() + grown as i64)
                } else {
                    b
                };
                b.build().unwrap()
            })
            .collect();
        let rg = rg
            .into_builder()
            .set_column_metadata(columns)
            .build()
            .unwrap();
        let m = metadata
            .clone()
            .into_builder()
            .set_row_groups(vec![rg])
            .build();
        ParquetMetaDataWriter::new(&mut data, &m).finish().unwrap();
        assert_refused(
            "page header",
            &data,
            &["cannot decode row group 0, column rm_scores"],
        );
    }
}

// ---------------------------------------------------------------------------------------
// List conventions

/// The grpo input with list columns named and nullable as given: (child name, child
/// nullable, column nullable).
fn grpo_with_lists(item: &str, item_nullable: bool, nullable: bool) -> RecordBatch {
    let field = |dt: DataType| Field::new(item, dt, item_nullable);
    let mut mask = ListBuilder::new(Int8Builder::new()).with_field(field(DataType::Int8));
    let mut scores = ListBuilder::new(Float32Builder::new()).with_field(field(DataType::Float32));
    for (m, s) in [
        (vec![1, 1], vec![0.0, 1.0]),
        (vec![1, 0, 1], vec![0.0, 0.0, 2.0]),
        (vec![1], vec![0.0]),
        (vec![0, 1], vec![0.0, 4.0]),
    ] {
        mask.append_value(m.into_iter().map(Some));
        scores.append_value(s.into_iter().map(Some));
    }
    let mask: ArrayRef = Arc::new(mask.finish());
    let scores: ArrayRef = Arc::new(scores.finish());
    let schema = arrow::datatypes::Schema::new(vec![
        Field::new("uid", DataType::Utf8, true),
        Field::new("response_mask", mask.data_type().clone(), nullable),
        Field::new("rm_scores", scores.data_type().clone(), nullable),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![strings(&["a", "b", "a", "b"]), mask, scores],
    )
    .unwrap()
}

fn list_convention(schema: &SchemaRef, name: &str) -> (String, bool, bool) {
    let field = schema.field_with_name(name).unwrap();
    match field.data_type() {
        DataType::List(item) | DataType::LargeList(item) => {
            (item.name().clone(), item.is_nullable(), field.is_nullable())
        }
        other => panic!("{name}: {other}"),
    }
}

fn output_schema(path: &Path) -> SchemaRef {
    if path.extension().is_some_and(|e| e == "arrow") {
        FileReader::try_new(File::open(path).unwrap(), None)
            .unwrap()
            .schema()
    } else {
        read_parquet(path).schema()
    }
}

/// Every computed list column of OUT, in Parquet and in Arrow IPC, has the list convention
/// the input's `response_mask` has as advcalc reads it, for inputs written in each
/// convention: arrow-rs (`item`), pyarrow's Parquet (`element`, the demo fixture), and
/// non-nullable children in Parquet and IPC.
#[test]
fn computed_lists_follow_the_inputs_convention() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    std::fs::copy(&demo, dir.join("pyarrow.parquet")).unwrap();
    write_parquet(&dir.join("arrow-rs.parquet"), &grpo_batch(), 2);
    write_parquet(
        &dir.join("element-required.parquet"),
        &grpo_with_lists("element", false, false),
        2,
    );
    for (name, batch) in [
        ("item.arrow", grpo_with_lists("item", true, true)),
        (
            "element-required.arrow",
            grpo_with_lists("element", false, true),
        ),
    ] {
        let mut w =
            FileWriter::try_new(File::create(dir.join(name)).unwrap(), &batch.schema()).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
    }
    let expected = [
        ("pyarrow.parquet", ("element", true, true)),
        // RecordBatch::try_from_iter: columns without nulls are not nullable
        ("arrow-rs.parquet", ("item", true, false)),
        ("element-required.parquet", ("element", false, false)),
        ("item.arrow", ("item", true, true)),
        ("element-required.arrow", ("element", false, true)),
    ];
    for (input, (item, item_nullable, nullable)) in expected {
        let in_schema = output_schema(&dir.join(input));
        assert_eq!(
            list_convention(&in_schema, "response_mask"),
            (item.to_string(), item_nullable, nullable),
            "{input} as advcalc reads it"
        );
        for out in ["out.parquet", "out.arrow"] {
            let run = run_in(dir, &["run", "-q", "-f", "-e", "grpo", input, out]);
            assert!(run.status.success(), "{input} → {out}: {}", stderr(&run));
            let schema = output_schema(&dir.join(out));
            for column in ["advantages", "returns", "token_level_rewards", "loss_mask"] {
                assert_eq!(
                    list_convention(&schema, column).0,
                    item,
                    "{input} → {out}: {column}"
                );
            }
            for column in ["advantages", "returns"] {
                assert_eq!(
                    list_convention(&schema, column),
                    (item.to_string(), item_nullable, nullable),
                    "{input} → {out}: {column}"
                );
            }
            if out == "out.parquet" {
                // the float columns' encoding settings found their leaves under that name
                let bytes = bytes::Bytes::from(std::fs::read(dir.join(out)).unwrap());
                let (metadata, _) = footer(&bytes);
                let rg = metadata.row_group(0);
                let leaf = rg
                    .columns()
                    .iter()
                    .find(|c| c.column_path().string() == format!("advantages.list.{item}"))
                    .unwrap_or_else(|| panic!("{input}: no leaf advantages.list.{item}"));
                assert!(
                    leaf.encodings()
                        .any(|e| e == parquet::basic::Encoding::BYTE_STREAM_SPLIT),
                    "{input}: advantages not byte-stream-split"
                );
            }
        }
    }
}
