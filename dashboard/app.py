"""Dashboard entry: login, then navigation. Each page is a module in dashboard/pages/ exposing render().

    streamlit run dashboard/app.py      (settings: QUANTROUTE_DASHBOARD_* environment variables)
"""

from __future__ import annotations

import streamlit as st

from dashboard import login
from dashboard.pages import audit, capacity, evals, fleet, policy, rollouts, sessions, tenants

st.set_page_config(page_title="quantroute", layout="wide")
# No "Deploy" button or developer menu for operators, reviewers and analysts, however the app is started
# (streamlit run, make demo, the container): a client option, so the script may set it itself.
st.set_option("client.toolbarMode", "viewer")

user = login.current_user()
if user is None:
    st.navigation([st.Page(login.login_form, title="Log in", url_path="login")], position="hidden").run()
    st.stop()

pages = [
    st.Page(fleet.render, title="Fleet", url_path="fleet", default=True),
    st.Page(policy.render, title="Policy", url_path="policy"),
    st.Page(sessions.render, title="Sessions", url_path="sessions"),
    st.Page(evals.render, title="Evals", url_path="evals"),
    st.Page(rollouts.render, title="Rollouts", url_path="rollouts"),
    st.Page(capacity.render, title="Capacity", url_path="capacity"),
    st.Page(tenants.render, title="Tenants", url_path="tenants"),
    st.Page(audit.render, title="Audit", url_path="audit"),
]
nav = st.navigation(pages)
with st.sidebar:
    st.markdown(f"**{user['name']}** · {user['role']}")
    if st.button("Log out"):
        login.logout()
        st.rerun()
nav.run()
