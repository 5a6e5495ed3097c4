"""The quantroute dashboard (Streamlit). Entry script: dashboard/app.py."""
