//! A tool that shows the model a picture beside its result: `plot_series`
//! draws a line chart of a series as a PNG and returns it with the series'
//! summary as a [`ToolReturn`]. The summary is the typed result (its schema
//! is the tool's output schema, the envelope and the ledger hold it); the
//! image reaches the model only, in each provider's own form.
//!
//! `cargo run --example chart`
//!
//! With no configuration it runs on an embedded scripted model and prints
//! the result the model reads, the attachment beside it, and where the PNG
//! was written. With `OPENAI_BASE_URL` (and `OPENAI_API_KEY`, `OPENAI_MODEL`
//! where needed) a real OpenAI-compatible model with vision drives it.

use aptix::model::ChatModel;
use aptix::model::openai::OpenAiChat;
use aptix::prelude::*;
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Catalog, Conversation, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::StreamExt;

/// The series to plot.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct Series {
    /// The values, in order; at least two.
    #[schemars(length(min = 2, max = 1000))]
    pub(crate) values: Vec<f64>,
}

/// What the chart shows, in numbers.
#[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub(crate) struct SeriesSummary {
    /// How many values were plotted.
    pub(crate) points: usize,
    /// The smallest value.
    pub(crate) min: f64,
    /// The largest value.
    pub(crate) max: f64,
    /// Their mean.
    pub(crate) mean: f64,
}

/// The chart's size in pixels.
pub(crate) const WIDTH: u32 = 320;
/// The chart's height in pixels.
pub(crate) const HEIGHT: u32 = 160;

/// Plots a series as a line chart; the model receives the image.
#[agent_tool(
    name = "plot_series",
    usage = "Call to see a series of numbers as a line chart: you receive the chart as an image, and its minimum, maximum and mean."
)]
pub(crate) async fn plot_series(series: Series) -> Result<ToolReturn<SeriesSummary>, ToolError> {
    let values = &series.values;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let png = line_chart_png(values, min, max).map_err(ToolError::internal)?;
    let summary = SeriesSummary {
        points: values.len(),
        min,
        max,
        mean,
    };
    Ok(ToolReturn::new(summary).with(Content::image(BASE64.encode(png), "image/png")))
}

/// Draws `values` (between `min` and `max`) as a blue line on white, with
/// grey axes, and encodes it as a PNG.
pub(crate) fn line_chart_png(
    values: &[f64],
    min: f64,
    max: f64,
) -> Result<Vec<u8>, png::EncodingError> {
    const MARGIN: i64 = 8;
    let (width, height) = (i64::from(WIDTH), i64::from(HEIGHT));
    let mut pixels = vec![255u8; (width * height * 3) as usize];
    let mut set = |x: i64, y: i64, rgb: [u8; 3]| {
        if (0..width).contains(&x) && (0..height).contains(&y) {
            let at = ((y * width + x) * 3) as usize;
            pixels[at..at + 3].copy_from_slice(&rgb);
        }
    };
    for x in MARGIN..width - MARGIN {
        set(x, height - MARGIN, [160, 160, 160]);
    }
    for y in MARGIN..height - MARGIN {
        set(MARGIN, y, [160, 160, 160]);
    }
    let span = if max > min { max - min } else { 1.0 };
    let point = |index: usize, value: f64| {
        let x = MARGIN
            + (index as f64 * (width - 2 * MARGIN - 1) as f64 / (values.len() - 1) as f64) as i64;
        let y =
            height - MARGIN - 1 - ((value - min) / span * (height - 2 * MARGIN - 2) as f64) as i64;
        (x, y)
    };
    for (index, pair) in values.windows(2).enumerate() {
        let (from, to) = (point(index, pair[0]), point(index + 1, pair[1]));
        // A line by steps along its longer side, two pixels thick.
        let steps = (to.0 - from.0).abs().max((to.1 - from.1).abs()).max(1);
        for step in 0..=steps {
            let x = from.0 + (to.0 - from.0) * step / steps;
            let y = from.1 + (to.1 - from.1) * step / steps;
            set(x, y, [31, 119, 180]);
            set(x, y + 1, [31, 119, 180]);
        }
    }
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&pixels)?;
    writer.finish()?;
    Ok(bytes)
}

/// The catalog of this example.
pub(crate) fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<PlotSeriesTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The embedded model: it asks for a chart of a week of sales, then
/// answers in text.
pub(crate) fn scripted_model() -> ScriptedModel {
    ScriptedModel::new([
        ScriptedTurn::new().tool_call(
            "call_chart",
            "plot_series",
            r#"{"values":[12,15,11,18,24,22,30]}"#,
        ),
        ScriptedTurn::new()
            .text("Sales rose through the week, from 12 to 30, with dips on days 3 and 6."),
    ])
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model: Box<dyn ChatModel> = match std::env::var("OPENAI_BASE_URL") {
        Ok(_) => Box::new(OpenAiChat::from_env()?),
        Err(_) => Box::new(scripted_model()),
    };
    let agent = Agent::builder()
        .shared_model(model.into())
        .catalog(catalog())
        .max_iterations(4)
        .build()?;
    let mut conversation = Conversation::new("chart-demo");
    let mut events = agent.run(
        &mut conversation,
        Input::User("Plot this week's sales: 12, 15, 11, 18, 24, 22, 30.".into()),
    );
    let mut reason = None;
    while let Some(event) = events.next().await {
        if let AgentEvent::Done { reason: done, .. } = event {
            reason = Some(done);
        }
    }
    drop(events);
    for message in &conversation.messages {
        if let Message::Tool {
            name,
            content,
            attachments,
            ..
        } = message
        {
            println!("{name} → {content}");
            for attachment in attachments {
                if let Content::Image {
                    data, mime_type, ..
                } = attachment
                {
                    let path = std::env::temp_dir().join("aptix-chart.png");
                    std::fs::write(&path, BASE64.decode(data)?)?;
                    println!(
                        "  attached: {mime_type}, {} bytes as base64, written to {}",
                        data.len(),
                        path.display()
                    );
                }
            }
        }
    }
    if let Some(Message::Assistant { content, .. }) = conversation.messages.last() {
        println!("model: {content}");
    }
    match reason {
        Some(DoneReason::Completed) => {
            println!("done: completed");
            Ok(())
        }
        other => Err(format!("the run ended with {other:?}").into()),
    }
}
