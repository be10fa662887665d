//// Plain-text reports for staff: overdue loans and catalog inventory.
////
//// Reports are fixed-width so they print cleanly on the desk's receipt
//// printer and paste into emails without losing alignment.

import bookshelf/book
import bookshelf/catalog
import bookshelf/ffi
import bookshelf/loan.{type Loan}
import bookshelf/member
import bookshelf/text
import bookshelf/worker.{type State}
import gleam/dict
import gleam/int
import gleam/list
import gleam/order
import gleam/string

const line_width = 72

const title_column = 34

/// A rendered report line; reports are built as lists and joined at the end.
pub type Line =
  String

/// The overdue report, grouped by member.
///
/// For each member with at least one overdue loan it prints their name and
/// id, then one row per overdue book with the due date, days late and the
/// fine accrued so far (as if the book were returned today). Members are
/// ordered by total fine, largest first, so the desk can chase the biggest
/// debts first. Loans whose book or member has since been deleted are
/// listed under "unknown" rather than dropped, because a missing record is
/// itself something staff should look into.
///
/// The footer has the number of overdue loans, the number of members
/// affected and the total accrued fines. An empty report still prints the
/// header and a "nothing overdue" line so it is obvious the job ran.
pub fn overdue_report(state: State, today: Int) -> String {
  let closed = state.config.closed_weekdays
  let overdue = loan.overdue(dict.values(state.loans), today)

  let rows =
    overdue
    |> list.map(fn(l: Loan) {
      let title = case catalog.get(state.catalog, l.book_id) {
        Ok(b) -> b.title
        Error(_) -> "unknown book " <> l.book_id
      }
      let fine = case
        catalog.get(state.catalog, l.book_id),
        dict.get(state.members, l.member_id)
      {
        Ok(b), Ok(m) -> loan.calculate_fine(l, b, m, today, closed).total_cents
        _, _ -> 0
      }
      #(l.member_id, #(title, l, fine))
    })

  let groups =
    rows
    |> list.group(fn(row) { row.0 })
    |> dict.to_list
    |> list.map(fn(entry) {
      let #(member_id, member_rows) = entry
      let items = list.map(member_rows, fn(row) { row.1 })
      let total = list.fold(items, 0, fn(acc, item) { acc + item.2 })
      #(member_id, items, total)
    })
    |> list.sort(fn(a, b) {
      case int.compare(b.2, a.2) {
        order.Eq -> string.compare(a.0, b.0)
        other -> other
      }
    })

  let header = [
    centre(state.config.library_name),
    centre("Overdue loans as of " <> ffi.format_iso_date(today)),
    string.repeat("=", line_width),
  ]

  let body = case groups {
    [] -> ["Nothing is overdue."]
    _ ->
      list.flat_map(groups, fn(group) {
        let #(member_id, items, total) = group
        let heading = case dict.get(state.members, member_id) {
          Ok(m) -> m.name <> " (" <> member_id <> ")"
          Error(_) -> "unknown member (" <> member_id <> ")"
        }
        let item_lines =
          list.map(items, fn(item) {
            let #(title, l, fine) = item
            "  "
            <> text.fit(title, title_column)
            <> " due "
            <> ffi.format_iso_date(l.due_on)
            <> string.pad_start(int.to_string(today - l.due_on) <> "d", 6, " ")
            <> string.pad_start(member.format_cents(fine), 10, " ")
          })
        list.flatten([
          [heading],
          item_lines,
          [
            string.pad_start(
              "subtotal " <> member.format_cents(total),
              line_width,
              " ",
            ),
            "",
          ],
        ])
      })
  }

  let grand_total = list.fold(groups, 0, fn(acc, group) { acc + group.2 })
  let footer = [
    string.repeat("-", line_width),
    int.to_string(list.length(overdue))
      <> " overdue loan(s), "
      <> int.to_string(list.length(groups))
      <> " member(s), "
      <> member.format_cents(grand_total)
      <> " accrued",
  ]

  list.flatten([header, body, footer])
  |> string.join("\n")
}

/// Inventory of the catalog grouped by genre, with copy counts.
pub fn inventory_report(state: State) -> String {
  let groups = catalog.group_by_genre(state.catalog)
  let lines =
    list.flat_map(groups, fn(group) {
      let #(label, books) = group
      let copies = list.fold(books, 0, fn(acc, b) { acc + b.copies })
      let heading =
        label
        <> " — "
        <> int.to_string(list.length(books))
        <> " title(s), "
        <> int.to_string(copies)
        <> " cop(ies)"
      let rows =
        list.map(books, fn(b) {
          "  "
          <> text.fit(b.title, title_column)
          <> " "
          <> text.fit(book.author_line(b), 24)
          <> string.pad_start(int.to_string(b.copies), 4, " ")
        })
      [heading, ..rows]
    })
  [centre("Inventory"), string.repeat("=", line_width), ..lines]
  |> string.join("\n")
}

/// Centre `content` within the report width. Text wider than the report is
/// returned unchanged.
pub fn centre(content: String) -> Line {
  let gap = line_width - string.length(content)
  case gap > 0 {
    True -> string.repeat(" ", gap / 2) <> content
    False -> content
  }
}
