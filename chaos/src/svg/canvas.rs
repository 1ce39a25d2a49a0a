//! The SVG elements the timeline is drawn with, in order, and text escaped for XML.

use std::fmt::Write as _;

/// The SVG elements, drawn in order.
#[derive(Debug, Default)]
pub(super) struct Canvas {
    pub(super) out: String,
}

impl Canvas {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rect_attrs(
        &mut self,
        class: &str,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        attrs: &str,
        tip: Option<&str>,
    ) {
        let _ = write!(
            self.out,
            r#"<rect class="{class}" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" {attrs}"#
        );
        match tip {
            Some(tip) => {
                let _ = writeln!(self.out, "><title>{}</title></rect>", escape(tip));
            }
            None => self.out.push_str("/>\n"),
        }
    }

    pub(super) fn text(&mut self, class: &str, x: f64, y: f64, anchor: &str, fill: &str, text: &str) {
        let _ = writeln!(
            self.out,
            r#"<text class="{class}" x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" fill="{fill}">{}</text>"#,
            escape(text)
        );
    }
}

/// Escapes text for XML content and attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}
