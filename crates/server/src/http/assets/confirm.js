// Confirmation for destructive and bulk actions: a modal <dialog> (Esc or
// "Keep them" says no), resolving to true only on the confirm button.

import { $, setText } from "./dom.js";

export function confirmAction(text, confirmLabel = "Confirm") {
  const dialog = $("#confirm");
  setText($("#confirm-text"), text);
  setText($("#confirm-yes"), confirmLabel);
  dialog.returnValue = "";
  dialog.showModal();
  $("#confirm-no").focus();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}
