import bookshelf/isbn
import gleam/result
import gleeunit/should

pub fn parse_isbn10_test() {
  isbn.parse("0-306-40615-2")
  |> result.map(isbn.to_string)
  |> should.equal(Ok("9780306406157"))
}

pub fn parse_isbn13_with_prefix_test() {
  isbn.parse("ISBN 978-0-306-40615-7")
  |> result.map(isbn.to_string)
  |> should.equal(Ok("9780306406157"))
}

pub fn lowercase_x_check_digit_test() {
  isbn.is_valid("0-8044-2957-x") |> should.be_true
}

pub fn bad_checksum_test() {
  isbn.parse("0-306-40615-3")
  |> should.equal(Error(isbn.BadChecksum(expected: "2", found: "3")))
}

pub fn wrong_length_test() {
  isbn.parse("12345") |> should.equal(Error(isbn.WrongLength(5)))
}

pub fn invalid_character_test() {
  isbn.parse("97803064A6157")
  |> should.equal(Error(isbn.InvalidCharacter("A", 8)))
}

pub fn round_trip_to_isbn10_test() {
  let assert Ok(parsed) = isbn.parse("9780306406157")
  isbn.to_isbn10(parsed) |> should.equal(Ok("0306406152"))
}

pub fn no_isbn10_for_979_test() {
  let assert Ok(parsed) = isbn.parse("979-10-90636-07-1")
  isbn.to_isbn10(parsed) |> should.equal(Error(isbn.NoIsbn10Equivalent))
}

pub fn format_test() {
  let assert Ok(parsed) = isbn.parse("0306406152")
  isbn.format(parsed) |> should.equal("978-0-3064-0615-7")
}
