//! Plain aligned text tables for the terminal.

/// Left-aligned columns separated by two spaces; the last column is not
/// padded, so lines carry no trailing blanks.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = widths[i] - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up() {
        let rows = vec![vec!["long-name".to_string(), "RUNNING".into()], vec!["a".into(), "FAILED".into()]];
        assert_eq!(
            super::render(&["NAME", "STATE"], &rows),
            "NAME       STATE\nlong-name  RUNNING\na          FAILED\n"
        );
    }
}
