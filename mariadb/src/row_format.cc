// See row_format.h. The bytes are documented in docs/sql/row_format.md. Runs on the thread
// that owns the TABLE.
#include "row_format.h"

#include <field.h>

namespace riptide_sql {

namespace {

// The stored fields of `table` that may be NULL, in field order: they own the bits of the
// bitmap. Virtual (not stored) generated columns are computed by the server after each read.
size_t null_bitmap_bytes(TABLE *table) {
  size_t nullable = 0;
  for (Field **field = table->field; *field; field++) {
    if ((*field)->stored_in_db() && (*field)->real_maybe_null()) nullable++;
  }
  return (nullable + 7) / 8;
}

}  // namespace

void pack_row(TABLE *table, const uchar *record, std::string *out) {
  const my_ptrdiff_t offset = record - table->record[0];
  const size_t bitmap_bytes = null_bitmap_bytes(table);
  // The largest the packed fields can be: each field's in-record length, plus a BLOB's data.
  size_t capacity = 1 + bitmap_bytes;
  for (Field **field = table->field; *field; field++) {
    capacity += (*field)->pack_length() + 2;
    if ((*field)->flags & BLOB_FLAG) {
      Field_blob *blob = static_cast<Field_blob *>(*field);
      capacity += blob->get_length(blob->ptr + offset);
    }
  }
  out->resize(capacity);
  uchar *start = reinterpret_cast<uchar *>(&(*out)[0]);
  start[0] = kRowFormatVersion;
  uchar *bitmap = start + 1;
  memset(bitmap, 0, bitmap_bytes);
  uchar *to = bitmap + bitmap_bytes;
  size_t null_index = 0;
  for (Field **field = table->field; *field; field++) {
    Field *current = *field;
    if (!current->stored_in_db()) continue;
    if (current->real_maybe_null()) {
      const bool is_null = current->is_real_null(offset);
      if (is_null) bitmap[null_index / 8] |= static_cast<uchar>(1u << (null_index % 8));
      null_index++;
      if (is_null) continue;
    }
    current->move_field_offset(offset);
    to = current->pack(to, current->ptr);
    current->move_field_offset(-offset);
  }
  out->resize(static_cast<size_t>(to - start));
}

void build_row_plan(TABLE *table, RowPlan *plan) {
  plan->table = table;
  plan->steps.clear();
  plan->bitmap_bytes = null_bitmap_bytes(table);
  for (Field **field = table->field; *field; field++) {
    Field *current = *field;
    if (!current->stored_in_db()) continue;
    RowPlan::Step step;
    step.field = current;
    step.field_index = current->field_index;
    step.nullable = current->real_maybe_null();
    step.indexed = (current->flags & (PRI_KEY_FLAG | PART_KEY_FLAG)) != 0;
    // The types RowPlan::Step::Skip names (row_format.h).
    switch (current->real_type()) {
      case MYSQL_TYPE_STRING:
      case MYSQL_TYPE_VARCHAR:
        step.skip = current->field_length > 255 ? RowPlan::Step::kTwoByteLength : RowPlan::Step::kOneByteLength;
        break;
      case MYSQL_TYPE_TINY:
      case MYSQL_TYPE_SHORT:
      case MYSQL_TYPE_INT24:
      case MYSQL_TYPE_LONG:
      case MYSQL_TYPE_LONGLONG:
      case MYSQL_TYPE_FLOAT:
      case MYSQL_TYPE_DOUBLE:
        step.skip = RowPlan::Step::kFixed;
        step.fixed_bytes = current->pack_length();
        break;
      default:
        step.skip = RowPlan::Step::kUnknown;
    }
    plan->steps.push_back(step);
  }
}

bool unpack_row(const RowPlan &plan, TABLE *table, uchar *record, const uint8_t *data, size_t length,
                const MY_BITMAP *wanted) {
  DBUG_ASSERT(plan.table == table);
  const my_ptrdiff_t offset = record - table->record[0];
  const size_t bitmap_bytes = plan.bitmap_bytes;
  if (length < 1 + bitmap_bytes || data[0] != kRowFormatVersion) return false;
  const uchar *bitmap = data + 1;
  const uchar *from = bitmap + bitmap_bytes;
  const uchar *end = data + length;
  // Bits the server keeps in the null bytes besides the fields' null bits start as in the
  // table's default row.
  memcpy(record, table->s->default_values, table->s->null_bytes);
  size_t null_index = 0;
  for (const RowPlan::Step &step : plan.steps) {
    Field *current = step.field;
    if (step.nullable) {
      const bool is_null = bitmap[null_index / 8] & (1u << (null_index % 8));
      null_index++;
      if (is_null) {
        current->set_null(offset);
        continue;
      }
      current->set_notnull(offset);
    }
    // A field the statement does not read is passed over when its length can be read: a
    // sysbench range query reads one or two of the four columns of its 100 rows.
    // Fields of any index are always decoded: the server compares them with range ends.
    if (wanted != nullptr && step.skip != RowPlan::Step::kUnknown && !step.indexed &&
        !bitmap_is_set(wanted, step.field_index)) {
      size_t skipped = step.fixed_bytes;
      if (step.skip == RowPlan::Step::kOneByteLength) {
        if (from + 1 > end) return false;
        skipped = 1 + *from;
      } else if (step.skip == RowPlan::Step::kTwoByteLength) {
        if (from + 2 > end) return false;
        skipped = 2 + uint2korr(from);
      }
      if (skipped > static_cast<size_t>(end - from)) return false;
      from += skipped;
      continue;
    }
    // BLOB fields point into `data` afterwards: the caller keeps it while the row is used.
    // Field_blob::unpack stores through the field's own pointer whatever `to` it is given, so
    // the field is moved onto `record` for the call.
    current->move_field_offset(offset);
    from = current->unpack(current->ptr, from, end, 0);
    current->move_field_offset(-offset);
    if (from == nullptr || from > end) return false;
  }
  return from == end;
}

bool unpack_row(TABLE *table, uchar *record, const uint8_t *data, size_t length, const MY_BITMAP *wanted) {
  RowPlan plan;
  build_row_plan(table, &plan);
  return unpack_row(plan, table, record, data, length, wanted);
}

}  // namespace riptide_sql
