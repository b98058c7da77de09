//! The status bar shows the last notice. A warning (the GPU cache's trouble while a study runs,
//! say) stays reachable under the notices after it, such as a study's summary at its end: a
//! button counts the warnings not yet dismissed and opens the notices, warnings first.

use crate::common::ui;
use egui_kittest::kittest::Queryable;
use tradetune_app::ui::settings::Settings;

const WARNING: &str = "warning: 3 reads and writes of TradeTune's GPU cache failed in this \
                       process (the first: disk full): autotune answers it did not keep are \
                       measured again by a next run of the same shapes";

#[test]
fn a_warning_stays_reachable_under_the_notices_after_it() {
    let mut h = ui::harness(
        ui::app(Settings::default(), ui::no_dialogs()),
        [1400.0, 900.0],
    );
    h.run_steps(ui::SETTLE_FRAMES);
    assert!(h.query_by_label_contains("warning").is_none());
    h.state_mut().cx.notice("data: the bundled sample");
    h.state_mut().cx.notice(WARNING);
    h.state_mut().cx.notice("study 'x' finished: 2 complete");
    h.run_steps(ui::SETTLE_FRAMES);
    // The last notice in the status bar; the warning one click away.
    h.get_by_label("study 'x' finished: 2 complete");
    assert!(h.query_by_label(WARNING).is_none());
    h.get_by_label("1 warning").click();
    h.run_steps(ui::SETTLE_FRAMES);
    h.get_by_label(WARNING);
    h.get_by_label("data: the bundled sample");
    // Dismissed, the button goes; the notices stay in their window.
    h.get_by_label("Dismiss warnings").click();
    h.run_steps(ui::SETTLE_FRAMES);
    assert!(h.query_by_label("1 warning").is_none());
    assert!(h.query_by_label("Dismiss warnings").is_none());
    h.get_by_label(WARNING);
    // A new warning brings the button back, counting only it, however many notices come after
    // it (the status bar keeps the last 50).
    h.state_mut().cx.notice("warning: another");
    for i in 0..60 {
        h.state_mut().cx.notice(format!("notice {i}"));
    }
    h.run_steps(ui::SETTLE_FRAMES);
    h.get_by_label("1 warning").click();
    h.run_steps(ui::SETTLE_FRAMES);
    h.get_by_label("warning: another");
    assert!(h.query_by_label("notice 0").is_none(), "only the last 50");
}

/// In a narrow window a long last notice is cut short, and the warnings' button stays on screen.
#[test]
fn a_long_notice_leaves_the_warnings_button_in_a_narrow_window() {
    let mut h = ui::harness(
        ui::app(Settings::default(), ui::no_dialogs()),
        [640.0, 480.0],
    );
    h.run_steps(ui::SETTLE_FRAMES);
    h.state_mut().cx.notice(WARNING);
    h.state_mut()
        .cx
        .notice(format!("study failed: {}", "a long reason ".repeat(40)));
    h.run_steps(ui::SETTLE_FRAMES);
    let button = h.get_by_label("1 warning").rect();
    assert!(button.max.x <= 640.0 && button.min.x >= 0.0, "{button:?}");
}
